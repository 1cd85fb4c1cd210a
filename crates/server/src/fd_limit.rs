//! File descriptors: the daemon raises its soft limit to the hard one at
//! start (as Go's runtime does), so a service manager's low default (often
//! 1,024) does not cap it, and accepts at most half of them as client
//! connections (`http.max_connections`), keeping the rest for its database,
//! executors, webhooks and chats. Past the cap new connections wait in the
//! kernel's queue until one closes, instead of the daemon running out of
//! descriptors and failing everything it opens.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Most descriptors asked for when the hard limit is unlimited.
const MOST: u64 = 1 << 20;

/// Raises the soft limit of open files towards the hard limit; the soft
/// limit in force afterwards (`None` when it cannot be read).
pub fn raise_open_files() -> Option<u64> {
    let now = getrlimit(Resource::Nofile);
    let hard = now.maximum.unwrap_or(MOST).min(MOST);
    let soft = now.current.unwrap_or(MOST);
    if soft >= hard {
        return Some(soft);
    }
    let raised = Rlimit {
        current: Some(hard),
        maximum: now.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => Some(hard),
        Err(e) => {
            tracing::debug!(error = %e, soft, hard, "cannot raise the limit of open files");
            Some(soft)
        }
    }
}

/// The client connections to accept at once: `configured` when set (not
/// 0), else half of `open_files` (at least 64).
pub fn max_connections(configured: usize, open_files: Option<u64>) -> usize {
    if configured > 0 {
        return configured;
    }
    let half = open_files.unwrap_or(1024) / 2;
    usize::try_from(half).unwrap_or(usize::MAX).max(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_descriptors_unless_configured() {
        assert_eq!(max_connections(10, Some(100_000)), 10);
        assert_eq!(max_connections(0, Some(20_000)), 10_000);
        assert_eq!(max_connections(0, Some(100)), 64);
        assert_eq!(max_connections(0, None), 512);
    }
}
