//! The delivery record (`<state-dir>/deliveries.jsonl`): which webhook ids
//! were started and what their first outcome was, so a redelivery never runs
//! a write or a command twice.
//!
//! Append-only JSON lines, each fsynced before the call returns:
//! `{"phase":"started",…}` is written *before* the side effect runs and
//! `{"phase":"done",…,"code","body"}` after. On start the file is replayed
//! a line at a time; a torn last line (a crash mid-append) is ignored, which
//! is safe because the side effect only starts after its `started` line is
//! durable. An id found `started` with no outcome was interrupted by a
//! crash: it is answered as failed and never re-run (it may or may not have
//! happened).
//!
//! What is kept is bounded: an outcome body over [`STORED_BODY_CAP`] bytes
//! is kept cut ([`cut`]: same status, its small top-level fields, the large
//! ones named in `replay_omitted`), so a replay answers the same status and
//! kind but not, say, a whole file `read_file` returned. The file is
//! compacted to one line per id, dropping outcomes older than the retention
//! (30 days by default; the daemon stops retrying long before), on start and
//! again whenever it has grown past twice its last compacted size plus 1 MiB.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Largest outcome body kept whole, in bytes of JSON.
pub const STORED_BODY_CAP: usize = 2048;

/// Largest top-level field kept in a cut body, in bytes of JSON.
const CUT_FIELD_CAP: usize = 256;

/// Longest line read back; a longer one (none is written) is skipped.
const MAX_LINE: u64 = 4 * 1024 * 1024;

/// The file is compacted once it is this much past twice its last compacted size.
const COMPACT_SLACK: u64 = 1024 * 1024;

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

/// Whether a started id is being run by this process.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Run {
    /// Started by this process; still running.
    Running,
    /// Started by an earlier process; never finished.
    Orphaned,
}

/// An id's state: its last durable line (a `done` line's body already
/// cut), and for a `started` one whether this process runs it.
#[derive(Debug)]
struct Entry {
    line: Line,
    run: Run,
}

#[derive(Debug)]
struct Inner {
    file: File,
    ids: HashMap<String, Entry>,
    /// Size of the file when last compacted.
    compacted: u64,
    /// Bytes appended since.
    appended: u64,
}

/// The delivery record.
#[derive(Debug)]
pub struct Dedupe {
    path: PathBuf,
    retention_secs: i64,
    inner: Mutex<Inner>,
}

/// Outcomes older than this many seconds are dropped when the file is compacted.
pub const DEFAULT_RETENTION_SECS: i64 = 30 * 24 * 3600;

/// `body` as kept for replays: whole up to [`STORED_BODY_CAP`] bytes of
/// JSON; past it the top-level fields of up to [`CUT_FIELD_CAP`] bytes each
/// (`kind`, `path`, `exit_code`, a short `error`…) and `replay_omitted`,
/// the names of those left out (a non-object body becomes just
/// `{"replay_omitted": true}`).
pub fn cut(body: Value) -> Value {
    if json_len(&body) <= STORED_BODY_CAP {
        return body;
    }
    let Value::Object(fields) = body else {
        return serde_json::json!({"replay_omitted": true});
    };
    let mut kept = Map::new();
    let mut omitted = Vec::new();
    let mut size = 0;
    for (k, v) in fields {
        let n = k.len() + json_len(&v);
        if n <= CUT_FIELD_CAP && size + n <= STORED_BODY_CAP / 2 {
            size += n;
            kept.insert(k, v);
        } else {
            omitted.push(Value::String(k));
        }
    }
    kept.insert("replay_omitted".into(), Value::Array(omitted));
    Value::Object(kept)
}

fn json_len(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

impl Dedupe {
    /// Opens (creating) the record in `dir`, replays and compacts it.
    pub fn open(dir: &Path, retention_secs: i64) -> io::Result<Dedupe> {
        let path = dir.join("deliveries.jsonl");
        let mut ids: HashMap<String, Entry> = HashMap::new();
        match File::open(&path) {
            Ok(f) => replay(&path, f, &mut ids)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        for e in ids.values_mut() {
            e.run = Run::Orphaned;
        }
        let (file, compacted) = compact(&path, &mut ids, retention_secs)?;
        Ok(Dedupe {
            path,
            retention_secs,
            inner: Mutex::new(Inner {
                file,
                ids,
                compacted,
                appended: 0,
            }),
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
        match inner.ids.get_mut(id) {
            Some(Entry {
                line: Line::Done { outcome, .. },
                ..
            }) => return Ok(Claim::Done(outcome.clone())),
            Some(Entry {
                run: Run::Running, ..
            }) => return Ok(Claim::Running),
            Some(e) => {
                e.run = Run::Running;
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
        self.append(&mut inner, &line)?;
        inner.ids.insert(
            id.to_owned(),
            Entry {
                line,
                run: Run::Running,
            },
        );
        Ok(Claim::New)
    }

    /// Records the outcome of a claimed id, durably (its body [`cut`]).
    pub fn finish(&self, id: &str, outcome: &Stored) -> io::Result<()> {
        let mut inner = self.lock()?;
        let line = Line::Done {
            id: id.to_owned(),
            outcome: Stored {
                code: outcome.code,
                body: cut(outcome.body.clone()),
            },
            at: now(),
        };
        // Keep the outcome in memory even if the disk fails, so this process
        // still answers redeliveries with it.
        inner.ids.insert(
            id.to_owned(),
            Entry {
                line: line.clone(),
                run: Run::Running,
            },
        );
        self.append(&mut inner, &line)?;
        if inner.appended > inner.compacted + COMPACT_SLACK {
            // The outcome is durable already; a failed compaction is retried
            // on the next outcome and at the next start.
            match compact(&self.path, &mut inner.ids, self.retention_secs) {
                Ok((file, size)) => {
                    inner.file = file;
                    inner.compacted = size;
                    inner.appended = 0;
                }
                Err(e) => {
                    tracing::warn!(record = %self.path.display(), error = %e, "cannot compact the delivery record");
                }
            }
        }
        Ok(())
    }

    fn append(&self, inner: &mut Inner, line: &Line) -> io::Result<()> {
        let mut bytes = serde_json::to_vec(line)?;
        bytes.push(b'\n');
        inner.file.write_all(&bytes)?;
        inner.appended += bytes.len() as u64;
        inner.file.sync_data()
    }

    fn lock(&self) -> io::Result<std::sync::MutexGuard<'_, Inner>> {
        self.inner
            .lock()
            .map_err(|_| io::Error::other("delivery record lock poisoned"))
    }
}

/// Reads the record a line at a time into `ids`, cutting old whole bodies.
fn replay(path: &Path, file: File, ids: &mut HashMap<String, Entry>) -> io::Result<()> {
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        n += 1;
        let got = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut buf)?;
        if got == 0 {
            return Ok(());
        }
        if got as u64 == MAX_LINE && buf.last() != Some(&b'\n') {
            tracing::warn!(record = %path.display(), line = n, "skipping an over-long delivery record line");
            skip_line(&mut reader)?;
            continue;
        }
        let line = match serde_json::from_slice::<Line>(&buf) {
            Ok(line) => line,
            Err(e) => {
                tracing::warn!(record = %path.display(), line = n, error = %e, "skipping an unreadable delivery record line (torn by a crash?)");
                continue;
            }
        };
        // A `done` line wins over a later duplicate `started`.
        if matches!(line, Line::Started { .. })
            && matches!(
                ids.get(line.id()),
                Some(Entry {
                    line: Line::Done { .. },
                    ..
                })
            )
        {
            continue;
        }
        let line = match line {
            Line::Done { id, outcome, at } => Line::Done {
                id,
                outcome: Stored {
                    code: outcome.code,
                    body: cut(outcome.body),
                },
                at,
            },
            started => started,
        };
        ids.insert(
            line.id().to_owned(),
            Entry {
                line,
                run: Run::Orphaned,
            },
        );
    }
}

fn skip_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let len = chunk.len();
                reader.consume(len);
            }
        }
    }
}

/// Rewrites the record as one line per id, dropping outcomes past the
/// retention (from `ids` too); returns the new file to append to and its size.
fn compact(
    path: &Path,
    ids: &mut HashMap<String, Entry>,
    retention_secs: i64,
) -> io::Result<(File, u64)> {
    let cutoff = now() - retention_secs;
    ids.retain(|_, e| !(matches!(e.line, Line::Done { .. }) && e.line.at() < cutoff));
    let mut compact = Vec::new();
    for e in ids.values() {
        compact.extend(serde_json::to_vec(&e.line)?);
        compact.push(b'\n');
    }
    crate::atomic::write(path, &compact, 0o600, crate::atomic::Replace::Yes)?;
    let mut file = OpenOptions::new().append(true).open(path)?;
    file.seek(SeekFrom::End(0))?;
    Ok((file, compact.len() as u64))
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
    fn a_large_outcome_is_kept_cut_with_its_status_and_small_fields() {
        let dir = tempfile::tempdir().unwrap();
        let big = Stored {
            code: 200,
            body: json!({"path": "big.txt", "content": "x".repeat(1 << 20), "bytes": 1 << 20, "truncated": false}),
        };
        let want = Stored {
            code: 200,
            body: json!({"path": "big.txt", "bytes": 1 << 20, "truncated": false, "replay_omitted": ["content"]}),
        };
        {
            let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
            d.claim("a", "read_file", 1).unwrap();
            d.finish("a", &big).unwrap();
            assert_eq!(
                d.claim("a", "read_file", 2).unwrap(),
                Claim::Done(want.clone())
            );
            assert!(fs::metadata(d.path()).unwrap().len() < 4096);
        }
        let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
        assert_eq!(d.claim("a", "read_file", 3).unwrap(), Claim::Done(want));
        let small = json!({"error": "e", "kind": "k"});
        assert_eq!(cut(small.clone()), small);
    }

    #[test]
    fn a_record_written_whole_by_an_older_version_is_read_back_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deliveries.jsonl");
        let line = json!({"phase": "done", "id": "a", "code": 422, "at": now(),
            "body": {"kind": "command_failed", "stdout": "y".repeat(100_000)}});
        fs::write(&path, format!("{line}\n")).unwrap();
        let d = Dedupe::open(dir.path(), DEFAULT_RETENTION_SECS).unwrap();
        let Claim::Done(got) = d.claim("a", "x", 2).unwrap() else {
            panic!("not done");
        };
        assert_eq!(got.code, 422);
        assert_eq!(got.body["kind"], "command_failed");
        assert_eq!(got.body["replay_omitted"], json!(["stdout"]));
        assert!(fs::metadata(&path).unwrap().len() < 4096);
    }

    #[test]
    fn the_record_is_compacted_while_running() {
        let dir = tempfile::tempdir().unwrap();
        let d = Dedupe::open(dir.path(), -10).unwrap();
        // Just under the cap: kept whole, so 600 of them pass the slack.
        let body = json!({"content": "z".repeat(STORED_BODY_CAP - 20)});
        for i in 0..600 {
            let id = format!("id{i}");
            d.claim(&id, "read_file", 1).unwrap();
            d.finish(
                &id,
                &Stored {
                    code: 200,
                    body: body.clone(),
                },
            )
            .unwrap();
        }
        // Outcomes past the retention (here at once) are gone from the file
        // and from memory without a restart.
        assert!(fs::metadata(d.path()).unwrap().len() < 2 * COMPACT_SLACK);
        assert!(d.lock().unwrap().ids.len() < 600);
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
