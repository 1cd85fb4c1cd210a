//! The daemon's connections to Postgres carry TCP keepalive and a user
//! timeout, so a network that silently drops everything ends them.
#![cfg(target_os = "linux")]

use std::time::Duration;

use actiongate_store::PgOptions;
use rustix::net::sockopt;
use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};

use crate::backends::{open_node_with, pg_database};

/// (keepalive, user timeout in ms) of every socket of this process whose
/// remote port is `port`.
fn sockets_to(port: u16) -> Vec<(bool, u32)> {
    let mut inodes = Vec::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let remote = f[2]
                .rsplit_once(':')
                .map(|(_, p)| u16::from_str_radix(p, 16).unwrap());
            if remote == Some(port) && f[3] == "01" {
                inodes.push(format!("socket:[{}]", f[9]));
            }
        }
    }
    let me = pidfd_open(getpid(), PidfdFlags::empty()).unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !inodes.iter().any(|i| target.as_os_str() == i.as_str()) {
            continue;
        }
        let fd: i32 = entry.file_name().to_str().unwrap().parse().unwrap();
        let Ok(sock) = pidfd_getfd(&me, fd, PidfdGetfdFlags::empty()) else {
            continue;
        };
        found.push((
            sockopt::socket_keepalive(&sock).unwrap(),
            sockopt::tcp_user_timeout(&sock).unwrap(),
        ));
    }
    found
}

#[tokio::test]
async fn connections_to_postgres_have_keepalive_and_a_user_timeout() {
    let Some(url) = pg_database() else {
        return;
    };
    let port: u16 = url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("the test cluster's URL names its port");
    // A bound no other test uses: 4 s + 7 s = 11 s of user timeout.
    let mut pg = PgOptions::new(&url);
    pg.connect_timeout = Duration::from_secs(4);
    pg.statement_timeout = Duration::from_secs(7);
    let store = open_node_with(pg).await;
    // The pool keeps at least one connection; other tests' stores in this
    // process have theirs, with their own timeouts.
    let ours: Vec<_> = sockets_to(port)
        .into_iter()
        .filter(|&(_, ms)| ms == 11_000)
        .collect();
    assert!(
        !ours.is_empty(),
        "no connection with an 11 s user timeout: {:?}",
        sockets_to(port)
    );
    assert!(ours.iter().all(|&(keepalive, _)| keepalive), "{ours:?}");
    drop(store);
}
