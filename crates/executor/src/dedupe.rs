//! The delivery record (`<state-dir>/deliveries.jsonl`): which webhook ids
//! were started and what their first outcome was, so a redelivery never runs
//! a write or a command twice.
//!
//! Append-only JSON lines, each fsynced before the call returns:
//! `{"phase":"started",…}` is written *before* the side effect runs and
//! `{"phase":"done",…,"code","body"}` after. On start the file is replayed;
//! a torn last line (a crash mid-append) is ignored, which is safe because
//! the side effect only starts after its `started` line is durable. An id
//! found `started` with no outcome was interrupted by a crash: it is answered
//! as failed and never re-run (it may or may not have happened). On start the
//! file is compacted to one line per id, dropping outcomes older than the
//! retention (30 days by default; the daemon stops retrying long before).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A stored first outcome: the HTTP status and JSON body that answered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    /// HTTP status code.
    pub code: u16,
    /// JSON body.
    pub body: Value,
}

/// What a delivery found when it claimed its id.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// First time: `started` is on disk; run the action, then [`Dedupe::finish`].
    New,
    /// Already finished: answer with this.
    Done(Stored),
    /// Being run by this process right now.
    Running,
    /// Started by an earlier process that died before recording the outcome.
    /// The caller must record a failure with [`Dedupe::finish`] and not run it.
    Interrupted,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "lowercase")]
enum Line {
    Started {
        id: String,
        action: String,
        attempt: u32,
        at: i64,
    },
    Done {
        id: String,
        #[serde(flatten)]
        outcome: Stored,
        at: i64,
    },
}

impl Line {
    fn id(&self) -> &str {
        match self {
            Line::Started { id, .. } | Line::Done { id, .. } => id,
        }
    }
    fn at(&self) -> i64 {
        match self {
            Line::Started { at, .. } | Line::Done { at, .. } => *at,
        }
    }
}

#[derive(Debug)]
enum State {
    /// Started by this process; still running.
    Running,
    /// Started by an earlier process; never finished.
    Orphaned,
    Done(Stored),
}

#[derive(Debug)]
struct Inner {
    file: File,
    ids: HashMap<String, State>,
}

/// The delivery record.
#[derive(Debug)]
pub struct Dedupe {
    path: PathBuf,
    inner: Mutex<Inner>,
}

/// Outcomes older than this many seconds are dropped when the file is compacted.
pub const DEFAULT_RETENTION_SECS: i64 = 30 * 24 * 3600;

impl Dedupe {
    /// Opens (creating) the record in `dir`, replays and compacts it.
    pub fn open(dir: &Path, retention_secs: i64) -> io::Result<Dedupe> {
        let path = dir.join("deliveries.jsonl");
        let mut text = String::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_string(&mut text)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut latest: HashMap<String, Line> = HashMap::new();
        let mut order = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            match serde_json::from_str::<Line>(raw) {
                Ok(line) => {
                    let id = line.id().to_owned();
                    // A `done` line wins over a later duplicate `started`.
                    let keep_done = matches!(latest.get(&id), Some(Line::Done { .. }))
                        && matches!(line, Line::Started { .. });
                    if !keep_done {
                        if !latest.contains_key(&id) {
                            order.push(id.clone());
                        }
                        latest.insert(id, line);
                    }
                }
                Err(e) => {
                    tracing::warn!(record = %path.display(), line = n + 1, error = %e, "skipping an unreadable delivery record line (torn by a crash?)");
                }
            }
        }
        let cutoff = now() - retention_secs;
        let mut compact = Vec::new();
        let mut ids = HashMap::new();
        for id in order {
            let Some(line) = latest.remove(&id) else {
                continue;
            };
            if line.at() < cutoff && matches!(line, Line::Done { .. }) {
                continue;
            }
            let state = match &line {
                Line::Started { .. } => State::Orphaned,
                Line::Done { outcome, .. } => State::Done(outcome.clone()),
            };
            compact.extend(serde_json::to_vec(&line)?);
            compact.push(b'\n');
            ids.insert(id, state);
        }
        crate::atomic::write(&path, &compact, 0o600, crate::atomic::Replace::Yes)?;
        let mut file = OpenOptions::new().append(true).open(&path)?;
        file.seek(SeekFrom::End(0))?;
        Ok(Dedupe {
            path,
            inner: Mutex::new(Inner { file, ids }),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Claims `id` for a delivery of `action`: on [`Claim::New`] the
    /// `started` line is durable before this returns.
    pub fn claim(&self, id: &str, action: &str, attempt: u32) -> io::Result<Claim> {
        let mut inner = self.lock()?;
        match inner.ids.get(id) {
            Some(State::Done(stored)) => return Ok(Claim::Done(stored.clone())),
            Some(State::Running) => return Ok(Claim::Running),
            Some(State::Orphaned) => {
                inner.ids.insert(id.to_owned(), State::Running);
                return Ok(Claim::Interrupted);
            }
            None => {}
        }
        let line = Line::Started {
            id: id.to_owned(),
            action: action.to_owned(),
            attempt,
            at: now(),
        };
        append(&mut inner.file, &line)?;
        inner.ids.insert(id.to_owned(), State::Running);
        Ok(Claim::New)
    }

    /// Records the outcome of a claimed id, durably.
    pub fn finish(&self, id: &str, outcome: &Stored) -> io::Result<()> {
        let mut inner = self.lock()?;
        // Keep the outcome in memory even if the disk fails, so this process
        // still answers redeliveries with it.
        inner
            .ids
            .insert(id.to_owned(), State::Done(outcome.clone()));
        let line = Line::Done {
            id: id.to_owned(),
            outcome: outcome.clone(),
            at: now(),
        };
        append(&mut inner.file, &line)
    }

    fn lock(&self) -> io::Result<std::sync::MutexGuard<'_, Inner>> {
        self.inner
            .lock()
            .map_err(|_| io::Error::other("delivery record lock poisoned"))
    }
}

fn append(file: &mut File, line: &Line) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(line)?;
    bytes.push(b'\n');
    file.write_all(&bytes)?;
    file.sync_data()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use std::fs;

    fn ok() -> Stored {
        Stored {
            code: 200,
            body: json!({"ok": true}),
        }
    }

    #[test]
    fn first_claim_is_new_then_running_then_done() {
        let dir = tempfile::tempdir().unwrap();
        let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
        assert_eq!(d.claim("a", "create_file", 1).unwrap(), Claim::New);
        assert_eq!(d.claim("a", "create_file", 2).unwrap(), Claim::Running);
        d.finish("a", &ok()).unwrap();
        assert_eq!(d.claim("a", "create_file", 3).unwrap(), Claim::Done(ok()));
    }

    #[test]
    fn outcomes_survive_a_reopen_and_unfinished_ids_come_back_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        {
            let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
            d.claim("done", "x", 1).unwrap();
            d.finish("done", &ok()).unwrap();
            d.claim("cut", "x", 1).unwrap();
        }
        let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
        assert_eq!(d.claim("done", "x", 2).unwrap(), Claim::Done(ok()));
        assert_eq!(d.claim("cut", "x", 2).unwrap(), Claim::Interrupted);
        assert_eq!(d.claim("cut", "x", 3).unwrap(), Claim::Running);
        d.finish("cut", &ok()).unwrap();
        drop(d);
        let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
        assert_eq!(d.claim("cut", "x", 4).unwrap(), Claim::Done(ok()));
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_appends_continue_on_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        {
            let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
            d.claim("a", "x", 1).unwrap();
            d.finish("a", &ok()).unwrap();
        }
        let path = dir.path().join("deliveries.jsonl");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"phase":"done","id":"b","co"#).unwrap();
        drop(f);
        let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
        assert_eq!(d.claim("a", "x", 2).unwrap(), Claim::Done(ok()));
        assert_eq!(d.claim("b", "x", 1).unwrap(), Claim::New);
        d.finish("b", &ok()).unwrap();
        drop(d);
        let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
        assert_eq!(d.claim("b", "x", 2).unwrap(), Claim::Done(ok()));
    }

    #[test]
    fn compaction_keeps_one_line_per_id_and_drops_old_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        {
            let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
            for id in ["a", "b"] {
                d.claim(id, "x", 1).unwrap();
                d.finish(id, &ok()).unwrap();
            }
        }
        let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
        let text = fs::read_to_string(d.path()).unwrap();
        assert_eq!(text.lines().count(), 2);
        drop(d);
        let d = Dedupe::open(dir.path(), -10).unwrap();
        assert_eq!(fs::read_to_string(d.path()).unwrap(), "");
        assert_eq!(d.claim("a", "x", 2).unwrap(), Claim::New);
    }
}
