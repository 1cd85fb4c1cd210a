//! Which CPUs a thread may run on (Linux's affinity masks), for
//! [`crate::StoreOptions::writer_cpu`]: the writer on a CPU of its own, the
//! daemon's other threads off it. A thread starts with the mask of the
//! thread that started it, so restricting the first thread before it starts
//! any other restricts them all.

use std::io;

/// The CPUs the calling thread may run on, in ascending order.
pub fn allowed() -> io::Result<Vec<usize>> {
    imp::allowed()
}

/// Restricts the calling thread, and the threads it starts from now on, to
/// `cpus`.
pub fn restrict(cpus: &[usize]) -> io::Result<()> {
    imp::restrict(cpus)
}

/// Keeps the calling thread, every thread it starts from now on, and the
/// process's threads already running (the allocator's background thread,
/// started before `main`) off `cpu`, which must be one it may run on and
/// not the only one. Returns the CPUs left to it; on an error (a one-line
/// reason) nothing changed.
pub fn keep_off(cpu: usize) -> Result<Vec<usize>, String> {
    let allowed = allowed().map_err(|e| format!("cannot read this thread's CPUs: {e}"))?;
    if !allowed.contains(&cpu) {
        return Err(format!(
            "CPU {cpu} is not one this process may run on ({})",
            list(&allowed)
        ));
    }
    let rest: Vec<usize> = allowed.into_iter().filter(|c| *c != cpu).collect();
    if rest.is_empty() {
        return Err(format!(
            "CPU {cpu} is the only one this process may run on; the other threads would have none"
        ));
    }
    restrict(&rest).map_err(|e| format!("cannot keep the threads off CPU {cpu}: {e}"))?;
    imp::restrict_others(&rest)
        .map_err(|e| format!("cannot keep the threads off CPU {cpu}: {e}"))?;
    Ok(rest)
}

/// `cpus` (ascending) as a CPU list: `0-3,6`.
pub fn list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        out.push(if cpus[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[i])
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;

    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;

    pub(super) fn allowed() -> io::Result<Vec<usize>> {
        // Pid 0: the calling thread.
        let set = sched_getaffinity(Pid::from_raw(0))?;
        Ok((0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect())
    }

    pub(super) fn restrict(cpus: &[usize]) -> io::Result<()> {
        let mut set = CpuSet::new();
        for &c in cpus {
            set.set(c)?;
        }
        sched_setaffinity(Pid::from_raw(0), &set)?;
        Ok(())
    }

    /// Restricts every other thread of the process that runs now.
    pub(super) fn restrict_others(cpus: &[usize]) -> io::Result<()> {
        let mut set = CpuSet::new();
        for &c in cpus {
            set.set(c)?;
        }
        for task in std::fs::read_dir("/proc/self/task")? {
            let Some(tid) = task?.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            match sched_setaffinity(Pid::from_raw(tid), &set) {
                // It ended meanwhile.
                Err(nix::errno::Errno::ESRCH) => {}
                other => other?,
            }
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;

    fn unsupported() -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            "CPU affinity is supported on Linux only",
        )
    }

    pub(super) fn allowed() -> io::Result<Vec<usize>> {
        Err(unsupported())
    }

    pub(super) fn restrict(_cpus: &[usize]) -> io::Result<()> {
        Err(unsupported())
    }

    pub(super) fn restrict_others(_cpus: &[usize]) -> io::Result<()> {
        Err(unsupported())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn lists_join_runs_of_cpus() {
        assert_eq!(list(&[]), "");
        assert_eq!(list(&[3]), "3");
        assert_eq!(list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_is_kept_off_a_cpu_and_its_own_threads_too() {
        // Its own thread: the test harness's threads keep their CPUs.
        std::thread::spawn(|| {
            let before = allowed().unwrap();
            assert!(!before.is_empty());
            let outside = before.last().unwrap() + 1;
            assert!(
                keep_off(outside)
                    .unwrap_err()
                    .contains("not one this process")
            );
            assert_eq!(allowed().unwrap(), before, "a refused CPU changes nothing");
            if before.len() == 1 {
                assert!(keep_off(before[0]).unwrap_err().contains("the only one"));
                assert_eq!(allowed().unwrap(), before);
                return;
            }
            let cpu = *before.last().unwrap();
            let rest = keep_off(cpu).unwrap();
            assert_eq!(rest, before[..before.len() - 1]);
            assert_eq!(allowed().unwrap(), rest);
            // A thread started now inherits the mask, and may widen its own;
            // kept to one CPU, it cannot be kept off that one.
            std::thread::spawn(move || {
                assert_eq!(allowed().unwrap(), rest);
                restrict(&[cpu]).unwrap();
                assert_eq!(allowed().unwrap(), [cpu]);
                assert!(keep_off(cpu).unwrap_err().contains("the only one"));
                assert_eq!(allowed().unwrap(), [cpu]);
            })
            .join()
            .unwrap();
        })
        .join()
        .unwrap();
    }
}
