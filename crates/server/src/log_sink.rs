//! Where the daemon's log goes: stderr, through a writer that never fails.
//!
//! A log line that cannot be written (stderr on a full disk, a closed pipe)
//! is dropped and counted (`actiongate_log_lines_dropped_total` on
//! `/metrics`), never reported: `eprintln!` and tracing's own report of a
//! failed write panic when stderr fails, and a panic in a request closes
//! its connection, in the signal task it leaves SIGTERM unanswered.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Lines this process could not write to stderr.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// How many log lines were dropped because stderr could not be written.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Writes `text` (whole lines) to stderr; when that fails, counts it as
/// dropped and goes on.
pub fn write(text: &str) {
    let mut err = std::io::stderr().lock();
    if err.write_all(text.as_bytes()).is_err() {
        let lines = text.lines().count().max(1);
        DROPPED.fetch_add(lines as u64, Ordering::Relaxed);
    }
}

/// [`write`] of one line (a newline added).
pub fn line(text: &str) {
    write(&format!("{text}\n"));
}

/// The log's writer for `tracing_subscriber`: one per event, writing to
/// stderr and never failing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // An event comes as one buffer; it is written whole or counted as
        // dropped, and reported as written either way.
        if std::io::stderr().lock().write_all(buf).is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Stderr {
        Stderr
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_writer_reports_every_buffer_written() {
        let mut w = Stderr;
        assert_eq!(w.write(b"a line\n").unwrap(), 7);
        assert!(w.flush().is_ok());
    }
}
