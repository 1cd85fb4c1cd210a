//! TCP keepalive and a user timeout on the connections to Postgres.
//!
//! Every call is bounded on the daemon's side (`Postgres::bounded`), but
//! some waits are sqlx's own: the round trip that tests a connection as it
//! goes back to the pool, and the listening connection's wait for the next
//! notification. Over a network that silently drops packets (a peer gone
//! without a reset, a lost NAT mapping) those never end by themselves:
//! the pool keeps losing connections until every request is refused, and
//! the listener never learns it hears nothing. The kernel ends such a
//! connection when it is told to: keepalive probes find an idle peer gone,
//! and `TCP_USER_TIMEOUT` ends a connection whose sent data stays
//! unacknowledged too long.
//!
//! sqlx opens its sockets itself and offers no option for either, so each
//! new connection asks Postgres which port it came from, finds its socket
//! among this process's (Linux `/proc`), and sets the options on a
//! duplicate of it (`pidfd_getfd`: the same socket, no `unsafe`). Where
//! that cannot be done (a Unix socket, a port rewritten by NAT, another
//! OS) the connection is used as is and the daemon-side bounds remain.

use std::time::Duration;

use sqlx::PgConnection;

/// Idle time before the first keepalive probe.
pub(crate) const IDLE: Duration = Duration::from_secs(10);
/// Time between probes.
pub(crate) const INTERVAL: Duration = Duration::from_secs(5);
/// Probes unanswered before the connection ends (without a user timeout).
pub(crate) const PROBES: u32 = 3;
/// Shortest user timeout set: a brief stall of the network should not end
/// every connection.
const MIN_USER_TIMEOUT: Duration = Duration::from_secs(5);

/// The user timeout for calls bounded at `call_bound`: data unacknowledged
/// that long ends the connection, since a call waiting on it has already
/// been answered 503.
pub(crate) fn user_timeout(call_bound: Duration) -> Duration {
    call_bound.max(MIN_USER_TIMEOUT)
}

/// Sets keepalive and `user_timeout` on `conn`'s socket when it is a TCP
/// socket this process can find. Answers whether it did; a failure to
/// find or set is logged, never an error: the connection works without.
pub(crate) async fn arm(conn: &mut PgConnection, user_timeout: Duration) -> bool {
    let ports: Result<(Option<i32>, Option<i32>), sqlx::Error> =
        sqlx::query_as("SELECT inet_client_port(), inet_server_port()")
            .fetch_one(&mut *conn)
            .await;
    let (local, remote) = match ports {
        Ok((Some(local), Some(remote))) => (local, remote),
        // A Unix socket: nothing to set.
        Ok(_) => return false,
        Err(e) => {
            tracing::debug!(error = %e, "asking Postgres for this connection's port failed");
            return false;
        }
    };
    let (Ok(local), Ok(remote)) = (u16::try_from(local), u16::try_from(remote)) else {
        return false;
    };
    // Reading /proc walks every descriptor (thousands with many streams
    // open): off the async workers.
    let armed = tokio::task::spawn_blocking(move || os::arm(local, remote, user_timeout))
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    match armed {
        Ok(()) => true,
        Err(why) => {
            tracing::debug!(%why, local, remote, "no TCP keepalive on a Postgres connection");
            false
        }
    }
}

#[cfg(target_os = "linux")]
mod os {
    use std::time::Duration;

    use rustix::net::sockopt;
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};

    /// Sets the options on this process's one established TCP socket from
    /// local port `local` to remote port `remote`.
    pub(super) fn arm(local: u16, remote: u16, user_timeout: Duration) -> Result<(), String> {
        let inode = socket_inode(local, remote)?;
        let fd = fd_of(inode)?;
        let me =
            pidfd_open(getpid(), PidfdFlags::empty()).map_err(|e| format!("pidfd_open: {e}"))?;
        // The socket's own connection holds it open while this runs (its
        // connection is being set up by the caller), so the number still
        // names it.
        let sock = pidfd_getfd(&me, fd, PidfdGetfdFlags::empty())
            .map_err(|e| format!("pidfd_getfd: {e}"))?;
        let ms = u32::try_from(user_timeout.as_millis()).unwrap_or(u32::MAX);
        sockopt::set_socket_keepalive(&sock, true)
            .and_then(|()| sockopt::set_tcp_keepidle(&sock, super::IDLE))
            .and_then(|()| sockopt::set_tcp_keepintvl(&sock, super::INTERVAL))
            .and_then(|()| sockopt::set_tcp_keepcnt(&sock, super::PROBES))
            .and_then(|()| sockopt::set_tcp_user_timeout(&sock, ms))
            .map_err(|e| format!("setsockopt: {e}"))
    }

    /// The inode of the one established socket `local` -> `remote` in this
    /// process's network namespace.
    fn socket_inode(local: u16, remote: u16) -> Result<u64, String> {
        let mut found = Vec::new();
        for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else {
                continue;
            };
            found.extend(
                text.lines()
                    .skip(1)
                    .filter_map(|l| matching(l, local, remote)),
            );
        }
        match found.as_slice() {
            [inode] => Ok(*inode),
            [] => Err(format!("no socket from port {local} to port {remote}")),
            _ => Err(format!(
                "several sockets from port {local} to port {remote}"
            )),
        }
    }

    /// The inode of a `/proc/net/tcp` line when it is an established socket
    /// from port `local` to port `remote`.
    pub(super) fn matching(line: &str, local: u16, remote: u16) -> Option<u64> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let port = |addr: &str| {
            addr.rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
        };
        // sl local rem st queues timer retransmits uid timeout inode
        let established = fields.get(3) == Some(&"01");
        if established
            && fields.get(1).and_then(|a| port(a)) == Some(local)
            && fields.get(2).and_then(|a| port(a)) == Some(remote)
        {
            fields.get(9)?.parse().ok().filter(|&inode| inode != 0)
        } else {
            None
        }
    }

    /// This process's descriptor of socket `inode`.
    fn fd_of(inode: u64) -> Result<i32, String> {
        let want = format!("socket:[{inode}]");
        let dir = std::fs::read_dir("/proc/self/fd").map_err(|e| format!("/proc/self/fd: {e}"))?;
        for entry in dir.flatten() {
            let is_it =
                std::fs::read_link(entry.path()).is_ok_and(|t| t.as_os_str() == want.as_str());
            if is_it && let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                return Ok(fd);
            }
        }
        Err(format!("no descriptor of socket {inode}"))
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    use std::time::Duration;

    pub(super) fn arm(_: u16, _: u16, _: Duration) -> Result<(), String> {
        Err("only on Linux".to_owned())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_line_matches_its_established_socket_only() {
        // 127.0.0.1:40000 -> 127.0.0.1:5432, established, inode 12345.
        let line = "   3: 0100007F:9C40 0100007F:1538 01 00000000:00000000 02:000009C4 \
                    00000000     0        0 12345 1 0000000000000000 20 4 30 10 -1";
        assert_eq!(os::matching(line, 40000, 5432), Some(12345));
        assert_eq!(os::matching(line, 40001, 5432), None);
        assert_eq!(os::matching(line, 40000, 5433), None);
        // Listening (0A), not established.
        let listening = line.replacen(" 01 ", " 0A ", 1);
        assert_eq!(os::matching(&listening, 40000, 5432), None);
    }

    #[test]
    fn the_user_timeout_follows_the_call_bound_with_a_floor() {
        assert_eq!(
            user_timeout(Duration::from_secs(15)),
            Duration::from_secs(15)
        );
        assert_eq!(user_timeout(Duration::from_secs(1)), MIN_USER_TIMEOUT);
    }
}
