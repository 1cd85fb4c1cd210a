//! Starting a daemon on a port picked free a moment earlier, and knowing it
//! is this child that listens there: between `free_port` and the child's
//! bind another test may take the port, and then a `/healthz` answered by
//! that test's daemon would look like this one being up.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Spawns `command(port)` on a free port until its child listens there
/// itself (a child that exits first, having lost the port, is started again
/// on another; five tries), within 30 s each. The child and its port.
pub fn spawn_listening(mut command: impl FnMut(u16) -> Command) -> (Child, u16) {
    let mut last = String::new();
    for _ in 0..5 {
        let port = super::free_port();
        let mut child = command(port).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut said = String::new();
                if let Some(mut err) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut err, &mut said);
                }
                last = format!("exited with {status}: {said}");
                break;
            }
            if listens(child.id(), port) {
                return (child, port);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the daemon did not listen on 127.0.0.1:{port} within 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("the daemon never held its port: {last}");
}

/// Whether process `pid` holds the socket listening on loopback `port`
/// (Linux: `/proc/net/tcp` names the socket's inode, `/proc/PID/fd` the
/// sockets the process holds).
pub fn listens(pid: u32, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    let wanted = format!(":{port:04X}");
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address, state (0A is LISTEN), inode.
            (fields.len() > 9 && fields[1].ends_with(&wanted) && fields[3] == "0A")
                .then(|| format!("socket:[{}]", fields[9]))
        })
        .collect();
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok).any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    })
}
