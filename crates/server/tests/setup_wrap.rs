//! `actiongate setup`, `doctor` and `wrap` against the real daemon:
//! setup merges into an existing config without losing its entries (and
//! `--dry-run` only prints the diff), the hook it installs answers, doctor
//! finds it, and a wrapped program's shell commands are gated.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use cli_support::{Run, all_actions};
use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn run_in(home: &std::path::Path, url: &str, args: &[&str]) -> Run {
    let mut cmd = cli_support::command(url, "");
    cmd.env_remove("ACTIONGATE_KEY")
        .env("HOME", home)
        .current_dir(home)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = cmd.output().await.unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const EXISTING: &str = r#"{
  "model": "opus",
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-done"}]}]
  }
}
"#;

#[tokio::test]
async fn setup_merges_without_losing_entries_and_the_installed_hook_answers() {
    let app = TestApp::spawn().await;
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, EXISTING).unwrap();

    // --dry-run: the diff, and nothing written.
    let r = run_in(
        home.path(),
        &app.base,
        &[
            "setup",
            "claude-code",
            "--user",
            "--dry-run",
            "--admin-key",
            &app.admin,
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(&format!("+++ {}", settings.display())),
        "{r:?}"
    );
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with('+') && l.contains(" hook claude-code --url ")),
        "{}",
        r.stdout
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), EXISTING);
    let key_file = home.path().join(".config/actiongate/claude-code.key");
    assert!(!key_file.exists());

    // For real, with the admin key.
    let r = run_in(
        home.path(),
        &app.base,
        &["setup", "claude-code", "--user", "--admin-key", &app.admin],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(doc["model"], "opus");
    assert_eq!(
        doc["hooks"]["Stop"][0]["hooks"][0]["command"],
        "notify-done"
    );
    let pre = doc["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "{doc}");
    assert_eq!(pre[0]["hooks"][0]["command"], "my-linter");
    assert_eq!(pre[1]["hooks"][0]["timeout"], 120);
    assert_eq!(
        doc["hooks"]["PermissionRequest"].as_array().unwrap().len(),
        1
    );
    // What ran is reported to the daemon after the fact.
    let post = doc["hooks"]["PostToolUse"].as_array().unwrap();
    assert_eq!(post.len(), 1, "{doc}");
    assert!(
        post[0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .contains(" hook claude-code "),
        "{doc}"
    );
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let (s, agent) = app
        .call(
            Method::GET,
            "/v1/agents/claude-code",
            Some(&app.admin),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{agent}");
    assert_eq!(agent["profile"], "readonly", "{agent}");

    // Again: nothing changes, no second key.
    let before = std::fs::read_to_string(&settings).unwrap();
    let r = run_in(home.path(), &app.base, &["setup", "claude-code", "--user"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), before);

    // The installed command, run as Claude Code runs it, answers.
    let command = pre[1]["hooks"][0]["command"].as_str().unwrap().to_owned();
    let input = std::fs::read(format!(
        "{}/tests/fixtures/hooks/claude-code/allowed.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let mut child = tokio::process::Command::new("/bin/sh")
        .args(["-c", &command])
        .env_remove("ACTIONGATE_KEY")
        .env_remove("ACTIONGATE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&input).await.unwrap();
    }
    let out = child.wait_with_output().await.unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["permissionDecision"], "allow",
        "{v}"
    );
    // A hook that cannot answer (its binary moved, or it crashed) exits 2,
    // which Claude Code reads as "blocked", never another code, which it
    // reads as "go on".
    let exe = command.split(" hook ").next().unwrap().to_owned();
    let crashing = home.path().join("crashing-actiongate");
    std::fs::write(&crashing, "#!/bin/sh\nkill -ABRT $$\n").unwrap();
    std::fs::set_permissions(&crashing, std::fs::Permissions::from_mode(0o755)).unwrap();
    for stand_in in [
        "'/nonexistent/actiongate'".to_owned(),
        format!("'{}'", crashing.display()),
    ] {
        let broken = command.replacen(&exe, &stand_in, 1);
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", &broken])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(2), "{broken}");
    }

    // doctor finds the hook and the key.
    let r = run_in(home.path(), &app.base, &["doctor", "--url", &app.base]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("ok    daemon answers"), "{}", r.stdout);
    assert!(
        r.stdout.contains("actiongate hook for claude-code, key"),
        "{}",
        r.stdout
    );
    // A config without the hook is reported.
    std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
    std::fs::write(home.path().join(".gemini/settings.json"), "{}").unwrap();
    let r = run_in(home.path(), &app.base, &["doctor", "--url", &app.base]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("run `actiongate setup gemini --user`"),
        "{}",
        r.stdout
    );
    // The hook again in the project's config, for another agent: both
    // would run, and doctor says to keep one.
    std::fs::remove_file(home.path().join(".gemini/settings.json")).unwrap();
    let r = run_in(
        home.path(),
        &app.base,
        &[
            "setup",
            "claude-code",
            "--project",
            "--dir",
            "proj",
            "--agent",
            "second",
            "--admin-key",
            &app.admin,
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let doctor = ["doctor", "--url", &app.base, "--dir", "proj"];
    let r = run_in(home.path(), &app.base, &doctor).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout
            .contains("both install an actiongate hook for claude-code"),
        "{}",
        r.stdout
    );
    app.stop().await;
}

/// A Cursor hook an older setup wrote asks about fewer of its agent's
/// tools: doctor names what runs unasked, and setup again fixes it.
#[tokio::test]
async fn doctor_names_the_cursor_tools_an_older_setup_left_unasked() {
    let app = TestApp::spawn().await;
    let home = tempfile::tempdir().unwrap();
    let setup = ["setup", "cursor", "--user", "--admin-key", &app.admin];
    let r = run_in(home.path(), &app.base, &setup).await;
    assert_eq!(r.code, 0, "{r:?}");
    let doctor = ["doctor", "--url", &app.base];
    let r = run_in(home.path(), &app.base, &doctor).await;
    assert_eq!(r.code, 0, "{r:?}");
    let hooks = home.path().join(".cursor/hooks.json");
    let text = std::fs::read_to_string(&hooks).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["hooks"]["preToolUse"][0]["matcher"] =
        json!("Write|Edit|StrReplace|MultiEdit|Delete|WebFetch|WebSearch|Task");
    std::fs::write(&hooks, serde_json::to_vec(&doc).unwrap()).unwrap();
    let r = run_in(home.path(), &app.base, &doctor).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains(
            "does not ask about ApplyAgentDiff, WriteShellStdin, Fetch, ReadMcpResource, ListMcpResources"
        ),
        "{}",
        r.stdout
    );
    let r = run_in(home.path(), &app.base, &setup).await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = run_in(home.path(), &app.base, &doctor).await;
    assert_eq!(r.code, 0, "{r:?}");
    app.stop().await;
}

#[tokio::test]
async fn setup_without_a_daemon_writes_a_service_only_when_asked() {
    let home = tempfile::tempdir().unwrap();
    let down = cli_support::dead_url().await;
    let r = run_in(home.path(), &down, &["setup", "gemini", "--url", &down]).await;
    // Unreachable, as for every client command.
    assert_eq!(r.code, 6, "{r:?}");
    assert!(r.stderr.contains("--service"), "{r:?}");
    let r = run_in(
        home.path(),
        &down,
        &["setup", "gemini", "--url", &down, "--service", "systemd"],
    )
    .await;
    assert_eq!(r.code, 6, "{r:?}");
    let unit = std::fs::read_to_string(home.path().join(".config/systemd/user/actiongate.service"))
        .unwrap();
    assert!(unit.contains(" serve --listen 127.0.0.1:"), "{unit}");
    assert!(r.stdout.contains("systemctl --user daemon-reload"), "{r:?}");
    // No hook was written before a key could be made.
    assert!(!home.path().join(".gemini/settings.json").exists());
    // The next step names where the service keeps its admin key.
    let default_data = home.path().join(".local/share/actiongate");
    assert!(
        r.stdout
            .contains(&default_data.join("admin.key").display().to_string()),
        "{r:?}"
    );
    // Its dry run shows the unit and stops where the real run does: no
    // hook config is shown as if it would be written.
    let r = run_in(
        home.path(),
        &down,
        &[
            "setup",
            "gemini",
            "--url",
            &down,
            "--service",
            "systemd",
            "--dry-run",
        ],
    )
    .await;
    assert_eq!(r.code, 6, "{r:?}");
    assert!(!r.stdout.contains("settings.json"), "{r:?}");
    // `--data-dir` names the service's data dir, made absolute (the
    // service does not run where setup ran).
    let other = home.path().join("gate-data");
    let r = run_in(
        home.path(),
        &down,
        &[
            "--data-dir",
            "gate-data",
            "setup",
            "gemini",
            "--url",
            &down,
            "--service",
            "systemd",
        ],
    )
    .await;
    assert_eq!(r.code, 6, "{r:?}");
    let unit = std::fs::read_to_string(home.path().join(".config/systemd/user/actiongate.service"))
        .unwrap();
    assert!(
        unit.contains(&format!("--data-dir \"{}\"", other.display())),
        "{unit}"
    );
    // Setup refuses the daemon's --config rather than ignore it.
    let r = run_in(
        home.path(),
        &down,
        &["--config", "x.toml", "setup", "gemini", "--url", &down],
    )
    .await;
    assert_eq!(r.code, 2, "{r:?}");
}

/// Run again once the daemon is up, setup finds the admin key in the
/// service's data dir; with no admin key anywhere, its dry run fails as
/// the real run does.
#[tokio::test]
async fn setup_finds_the_services_admin_key_and_a_dry_run_needs_one_too() {
    let app = TestApp::spawn().await;
    let home = tempfile::tempdir().unwrap();
    let bare = ["setup", "gemini", "--url", app.base.as_str()];
    for extra in [&[][..], &["--dry-run"][..]] {
        let args: Vec<&str> = bare.iter().chain(extra).copied().collect();
        let r = run_in(home.path(), &app.base, &args).await;
        assert_eq!(r.code, 2, "{extra:?}: {r:?}");
        assert!(r.stderr.contains("an admin key is needed"), "{r:?}");
    }
    let service_data = app.dir.path().to_str().unwrap();
    let args: Vec<&str> = bare
        .iter()
        .copied()
        .chain(["--service-data-dir", service_data])
        .collect();
    let r = run_in(home.path(), &app.base, &args).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(home.path().join(".gemini/settings.json").exists());
    app.stop().await;
}

/// Runs `script` as the agent under `actiongate wrap --shell /bin/sh
/// --wait WAIT` in `dir`: its exit code, stdout and stderr.
async fn run_wrapped(
    app: &TestApp,
    dir: &std::path::Path,
    script: &str,
    wait: &str,
) -> (Option<i32>, String, String) {
    let agent = dir.join("agent.sh");
    std::fs::write(&agent, script).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut cmd = cli_support::command(&app.base, &app.agent);
    cmd.current_dir(dir)
        .args(["wrap", "--shell", "/bin/sh", "--wait", wait, "--"])
        .arg(&agent)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = cmd.output().await.unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The action strings the daemon recorded, oldest first.
async fn action_strings(app: &TestApp) -> Vec<Value> {
    all_actions(app)
        .await
        .iter()
        .map(|a| a["action_string"].clone())
        .collect()
}

#[tokio::test]
async fn wrap_gates_the_shell_commands_a_wrapped_program_runs() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:sh:touch allowed-file"], "ask": [],
               "deny": ["tool:sh:touch denied-file"]}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    // The "agent": a program that runs two commands through $SHELL.
    let (code, stdout, stderr) = run_wrapped(
        &app,
        dir.path(),
    "#!/bin/sh\n\"$SHELL\" -c 'touch denied-file' || echo refused\n\"$SHELL\" -c 'touch allowed-file'\n",
        "2",
    )
    .await;
    assert_eq!(code, Some(0), "{stdout} {stderr}");
    assert!(dir.path().join("allowed-file").exists());
    assert!(!dir.path().join("denied-file").exists());
    assert!(stdout.contains("refused"), "{stdout}");
    assert!(stderr.contains("actiongate: denied by policy"), "{stderr}");
    let strings = action_strings(&app).await;
    assert_eq!(
        strings,
        vec![
            json!("tool:sh:touch denied-file"),
            json!("tool:sh:touch allowed-file")
        ]
    );
    app.stop().await;
}

/// The shell runs the first operand after all its options (`sh -c -- CMD`,
/// `sh -c -e CMD`, `bash -co pipefail CMD`), so that is what the shim
/// must ask about, not the option that follows `-c`; and arguments after
/// the command (its `$0`, `$1`, …, which it may run) are part of it.
#[tokio::test]
async fn wrap_asks_about_the_command_the_shell_will_run() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["(?s).*"], "ask": [], "deny": ["(?s)tool:(bash|sh):.*touch sneaky.*"]}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (_, stdout, stderr) = run_wrapped(
        &app,
        dir.path(),
        concat!(
            "#!/bin/sh\n",
            "\"$SHELL\" -c -- 'touch sneaky-1' || echo refused-1\n",
            "\"$SHELL\" -c -e 'touch sneaky-2' || echo refused-2\n",
            "\"$SHELL\" -c 'eval \"$1\"' sh 'touch sneaky-3' || echo refused-3\n",
            "\"$SHELL\" -e -c 'touch fine' || echo refused-4\n",
        ),
        "2",
    )
    .await;
    for n in 1..=3 {
        assert!(
            !dir.path().join(format!("sneaky-{n}")).exists(),
            "sneaky-{n} ran: {stdout} {stderr}"
        );
        assert!(stdout.contains(&format!("refused-{n}")), "{stdout}");
    }
    assert!(dir.path().join("fine").exists(), "{stdout} {stderr}");
    let strings = action_strings(&app).await;
    assert_eq!(
        strings,
        vec![
            json!("tool:sh:touch sneaky-1"),
            json!("tool:sh:touch sneaky-2"),
            json!("tool:sh:eval \"$1\" 'sh' 'touch sneaky-3'"),
            json!("tool:sh:touch fine"),
        ],
        "{stdout} {stderr}"
    );
    app.stop().await;
}

/// What a review of wrap found, through the built binary: a line dash
/// reads otherwise than bash (`&>` is "in the background, then a
/// redirection" there) was asked as bash and allowed by `readonly`; bash's
/// single-dash long options (`-rcfile F`) hid the command from the shim;
/// an argument that is not UTF-8 exited 2 (which a caller may read as
/// anything) instead of 126.
#[tokio::test]
async fn wrap_reads_the_line_as_the_real_shell_does_and_guesses_nothing() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("readonly")).await;
    let dir = tempfile::tempdir().unwrap();
    let (_, stdout, stderr) = run_wrapped(
        &app,
        dir.path(),
    concat!(
        "#!/bin/bash\n",
        "\"$SHELL\" -c 'ls &>/dev/null touch dash-ran' || echo refused-1\n",
        "ACTIONGATE_REAL_SHELL=/bin/bash \"$SHELL\" -rcfile ls -c 'touch rcfile-ran' || echo refused-2\n",
        "\"$SHELL\" -c $'ls \\xff' ; echo \"bytes=$?\"\n",
        "\"$SHELL\" -c 'ls' >/dev/null && echo plain-ran\n",
    ),
        "1",
    )
    .await;
    assert!(!dir.path().join("dash-ran").exists(), "{stdout} {stderr}");
    assert!(!dir.path().join("rcfile-ran").exists(), "{stdout} {stderr}");
    for line in ["refused-1", "refused-2", "bytes=126", "plain-ran"] {
        assert!(stdout.contains(line), "{line}: {stdout} {stderr}");
    }
    let strings = action_strings(&app).await;
    assert_eq!(
        strings,
        vec![
            json!("tool:sh:ls &>/dev/null touch dash-ran"),
            json!("tool:bash:/bin/bash '-rcfile' 'ls' '-c' 'touch rcfile-ran'"),
            json!("tool:sh:ls"),
        ],
        "{stdout} {stderr}"
    );
    app.stop().await;
}

/// An agent that kills the shell it ran (its own command timeout) while
/// the shim waits for a human: the question is withdrawn, so nobody can
/// approve a command that will never run, and nothing runs.
#[tokio::test]
async fn a_shim_stopped_while_it_waits_withdraws_its_question() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": [], "ask": ["(?s).*"], "deny": []}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = cli_support::command(&app.base, &app.agent);
    cmd.current_dir(dir.path())
        .args([
            "hook",
            "shell",
            "--real-shell",
            "/bin/sh",
            "--wait",
            "60",
            "--",
        ])
        .args(["-c", "touch stopped"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id().unwrap();
    let started = std::time::Instant::now();
    while !all_actions(&app)
        .await
        .iter()
        .any(|a| a["status"] == "pending")
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "never asked"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Give the shim a moment to be waiting, then stop it as a runtime would.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::time::timeout(std::time::Duration::from_secs(15), child.wait_with_output())
        .await
        .expect("the shim exits once stopped")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(126), "{stderr}");
    assert!(stderr.contains("stopped while waiting"), "{stderr}");
    let actions = all_actions(&app).await;
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0]["status"], "cancelled", "{}", actions[0]);
    assert!(!dir.path().join("stopped").exists());
    app.stop().await;
}

/// A settings file holds more than hooks (Claude Code's `env` often holds
/// API keys): setup keeps its permissions, never replaces a file it could
/// not read (it would write the hook alone over the user's settings), and
/// writes the agent key 0600 even over a stale temporary file.
#[tokio::test]
async fn setup_keeps_permissions_and_never_clobbers_what_it_cannot_read() {
    let app = TestApp::spawn().await;
    let home = tempfile::tempdir().unwrap();
    let claude = home.path().join(".claude/settings.json");
    std::fs::create_dir_all(claude.parent().unwrap()).unwrap();
    std::fs::write(&claude, EXISTING).unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A temporary file left behind by an interrupted run, world-readable.
    let key_dir = home.path().join(".config/actiongate");
    std::fs::create_dir_all(&key_dir).unwrap();
    let stale = key_dir.join("claude-code.actiongate-tmp");
    std::fs::write(&stale, "").unwrap();
    std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o644)).unwrap();

    let r = run_in(
        home.path(),
        &app.base,
        &["setup", "claude-code", "--user", "--admin-key", &app.admin],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let text = std::fs::read_to_string(&claude).unwrap();
    assert!(text.contains(" hook claude-code "), "{text}");
    let mode = std::fs::metadata(&claude).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the settings file's permissions");
    let key_file = key_dir.join("claude-code.key");
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the key file's permissions");
    // A key file others can read: doctor says so, and setup, reusing it,
    // makes it the owner's alone.
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = run_in(home.path(), &app.base, &["doctor", "--url", &app.base]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("readable by other users"), "{}", r.stdout);
    let r = run_in(
        home.path(),
        &app.base,
        &["setup", "claude-code", "--user", "--admin-key", &app.admin],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{r:?}");

    // Gemini's settings are not UTF-8 (or cannot be read), or hold comments
    // (Gemini CLI reads them, setup cannot merge into them): refused, kept,
    // before any agent or key is made.
    let gemini = home.path().join(".gemini/settings.json");
    std::fs::create_dir_all(gemini.parent().unwrap()).unwrap();
    let odd: &[u8] = b"{\"theme\": \"caf\xe9\", \"model\": {\"name\": \"x\"}}\n";
    let commented: &[u8] = b"{\n  // the model\n  \"model\": {\"name\": \"x\"}\n}\n";
    for settings in [odd, commented] {
        std::fs::write(&gemini, settings).unwrap();
        let r = run_in(
            home.path(),
            &app.base,
            &["setup", "gemini", "--user", "--admin-key", &app.admin],
        )
        .await;
        assert_ne!(r.code, 0, "{r:?}");
        assert_eq!(std::fs::read(&gemini).unwrap(), settings);
        assert!(
            !home.path().join(".config/actiongate/gemini.key").exists(),
            "{r:?}"
        );
    }
    app.stop().await;
}

/// What a review of setting up found: a runtime without a user config is
/// refused before anything is made; a key file the daemon refuses
/// (revoked) is replaced, not reported as up to date; the admin key is
/// read from the data dir `--data-dir` names.
#[tokio::test]
async fn setup_refuses_before_it_makes_anything_and_replaces_a_revoked_key() {
    let app = TestApp::spawn().await;
    let home = tempfile::tempdir().unwrap();
    let r = run_in(
        home.path(),
        &app.base,
        &[
            "setup",
            "copilot",
            "--user",
            "--agent",
            "fresh",
            "--admin-key",
            &app.admin,
        ],
    )
    .await;
    assert_eq!(r.code, 2, "{r:?}");
    assert!(!home.path().join(".config/actiongate/fresh.key").exists());
    let (s, _) = app
        .call(Method::GET, "/v1/agents/fresh", Some(&app.admin), None)
        .await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "setup made the agent before refusing"
    );

    // The admin key from `--data-dir`, a first key, then that key revoked.
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("admin.key"), format!("{}\n", app.admin)).unwrap();
    let data_dir = data.path().to_str().unwrap();
    let setup = ["--data-dir", data_dir, "setup", "codex", "--project"];
    let r = run_in(home.path(), &app.base, &setup).await;
    assert_eq!(r.code, 0, "{r:?}");
    let key_file = home.path().join(".config/actiongate/codex.key");
    let first = std::fs::read_to_string(&key_file).unwrap();
    let (_, keys) = app
        .call(Method::GET, "/v1/keys", Some(&app.admin), None)
        .await;
    let id = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["agent"] == "codex")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, _) = app
        .call(
            Method::DELETE,
            &format!("/v1/keys/{id}"),
            Some(&app.admin),
            None,
        )
        .await;
    assert!(s.is_success(), "{s}");
    let r = run_in(home.path(), &app.base, &setup).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("it is replaced"), "{r:?}");
    let second = std::fs::read_to_string(&key_file).unwrap();
    assert_ne!(first, second);
    let (s, who) = app
        .call(Method::GET, "/v1/whoami", Some(second.trim()), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{who}");
    assert_eq!(who["agent"], "codex", "{who}");
    // Another agent's key in the file is an error, and stays.
    std::fs::write(&key_file, &app.agent).unwrap();
    let r = run_in(home.path(), &app.base, &setup).await;
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("not of agent `codex`"), "{r:?}");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), app.agent);
    app.stop().await;
}
