//! The daemon's text log holds no colour codes where nobody reads colours:
//! with stderr redirected to a file, or on a terminal with `NO_COLOR` set
//! (no-color.org); on a terminal without it, it is coloured.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{binary, free_port};

const ESC: u8 = 0x1b;

/// Whether `GET /healthz` on `port` answers 200.
fn healthz(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(
        &([127, 0, 0, 1], port).into(),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = [0u8; 12];
    s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").is_ok()
        && s.read_exact(&mut head).is_ok()
        && head.ends_with(b"200")
}

/// Starts `command` (which starts the daemon on `port`, on `data`) in its
/// own process group, waits until the daemon answers, then kills the group
/// and the daemon.
fn run_until_up(mut command: Command, port: u16, data: &Path) {
    command.process_group(0).stdin(Stdio::null());
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut up = false;
    while Instant::now() < deadline && !up {
        up = healthz(port);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the log of the first request reach the file.
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.wait();
    // Under script(1) the daemon has a session and group of its own, which
    // the kill above does not reach, and it outlives its terminal.
    kill_daemons_on(data);
    assert!(up, "the daemon did not come up");
}

/// Kills (SIGKILL) every process whose command line names `data`.
fn kill_daemons_on(data: &Path) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    let needle = data.display().to_string();
    for entry in procs.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if args.contains("actiongate") && args.contains(&needle) && !args.starts_with("script") {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
}

fn serve(data: &Path, port: u16) -> Vec<String> {
    vec![
        binary("actiongate").display().to_string(),
        "serve".into(),
        "--data-dir".into(),
        data.display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
    ]
}

/// The log of a daemon started under `script`, which gives it a terminal,
/// or `None` without `script`.
fn log_on_a_terminal(no_color: Option<&str>) -> Option<Vec<u8>> {
    let script = Command::new("script").arg("--version").output();
    if !script.is_ok_and(|o| o.status.success()) {
        eprintln!("script(1) is missing: the terminal half is skipped");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("typescript");
    let mut cmd = Command::new("script");
    cmd.args(["-q", "-e", "-f", "-c"])
        .arg(serve(&dir.path().join("data"), port).join(" "))
        .arg(&log)
        .env("ACTIONGATE_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(v) = no_color {
        cmd.env("NO_COLOR", v);
    }
    run_until_up(cmd, port, &dir.path().join("data"));
    Some(std::fs::read(&log).unwrap())
}

#[test]
fn a_log_redirected_to_a_file_has_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("daemon.log");
    let args = serve(&dir.path().join("data"), port);
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..])
        .env("ACTIONGATE_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    run_until_up(cmd, port, &dir.path().join("data"));
    let text = std::fs::read(&log).unwrap();
    let shown = String::from_utf8_lossy(&text);
    assert!(shown.contains("INFO"), "the log says something: {shown}");
    assert!(!text.contains(&ESC), "escape codes in the log: {shown:?}");
}

#[test]
fn a_terminal_log_is_coloured_unless_no_color_is_set() {
    let Some(coloured) = log_on_a_terminal(None) else {
        return;
    };
    assert!(
        coloured.contains(&ESC),
        "a terminal gets colours: {:?}",
        String::from_utf8_lossy(&coloured)
    );
    let Some(plain) = log_on_a_terminal(Some("1")) else {
        return;
    };
    let shown = String::from_utf8_lossy(&plain);
    assert!(shown.contains("INFO"), "the log says something: {shown}");
    assert!(
        !plain.contains(&ESC),
        "NO_COLOR=1 still coloured: {shown:?}"
    );
}

/// A reader that closes the pipe early (`actiongate openapi | head -1`)
/// ends the command quietly with 141, as a closed pipe ends any Unix tool,
/// not with a panic and its backtrace on stderr.
#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let mut child = Command::new(crate::common::binary("actiongate"))
        .arg("openapi")
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The document is larger than a pipe holds: the write meets the close.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{said}");
    assert!(said.is_empty(), "{said}");
}

/// Standard output that cannot be written (a full disk) is one line on
/// stderr and exit 1, not a panic.
#[test]
fn a_full_stdout_is_one_line_and_exit_1() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return;
    };
    let out = Command::new(crate::common::binary("actiongate"))
        .arg("openapi")
        .stdout(full)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(said.contains("cannot write to standard output"), "{said}");
}
