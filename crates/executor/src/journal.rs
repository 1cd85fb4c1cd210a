//! `agent_actions.jsonl`: one line per action the executor ran or refused,
//! with the seed's fields (`timestamp`, `action_type`, `filepath`, `reason`,
//! `status`, `details`) plus `action_id`, `attempt` and `agent`.
//!
//! Each line is appended and fsynced on its own; a journal that cannot be
//! written is reported in the process log and never stops an action.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

/// How an action ended, in the seed's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It did what was asked.
    Success,
    /// It was refused or did not succeed for a reason the agent can act on
    /// (a refused path, an existing file, a non-zero exit, a timeout).
    Failed,
    /// Something unexpected went wrong (I/O errors, an interrupted run).
    Error,
}

/// One journal line.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Unix seconds.
    pub timestamp: i64,
    /// The action's name.
    pub action_type: String,
    /// The `filepath` param as sent (for commands: the shell).
    pub filepath: Option<String>,
    /// The `reason` param as sent.
    pub reason: Option<String>,
    /// How it ended.
    pub status: Status,
    /// What happened, in a sentence.
    pub details: String,
    /// The daemon's action id.
    pub action_id: String,
    /// The delivery attempt that ran it.
    pub attempt: u32,
    /// The agent that asked.
    pub agent: Option<String>,
}

/// The append-only journal file.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: Mutex<File>,
}

impl Journal {
    /// Opens (creating) the journal for appending. A last line a crash
    /// tore (a kill can stop a write between pages) is cut off, so the next
    /// entry starts a line of its own and every line stays one JSON value.
    /// That action's outcome is kept in the delivery record, written first.
    pub fn open(path: &Path) -> io::Result<Journal> {
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)?;
        let torn = cut_torn_line(&mut file)?;
        if torn > 0 {
            tracing::warn!(journal = %path.display(), bytes = torn, "cut off a journal line torn by a crash");
        }
        Ok(Journal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry; failures are logged, not returned.
    pub fn append(&self, entry: &Entry) {
        if let Err(e) = self.try_append(entry) {
            tracing::error!(journal = %self.path.display(), action_id = %entry.action_id, error = %e, "cannot append to the action journal");
        }
    }

    fn try_append(&self, entry: &Entry) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry)?;
        line.push(b'\n');
        let mut file = self
            .file
            .lock()
            .map_err(|_| io::Error::other("journal lock poisoned"))?;
        file.write_all(&line)?;
        file.sync_data()
    }
}

/// The longest tail [`cut_torn_line`] takes for a torn line.
const MAX_TORN: u64 = 16 << 20;

/// Truncates `file` after its last newline; how many bytes it cut.
fn cut_torn_line(file: &mut File) -> io::Result<u64> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        // A pipe or a terminal (`/dev/stdout`): nothing to read back.
        return Ok(0);
    }
    let len = meta.len();
    let floor = len.saturating_sub(MAX_TORN);
    let (mut end, mut found) = (len, false);
    let mut buf = [0u8; 4096];
    while end > floor {
        let start = end.saturating_sub(buf.len() as u64).max(floor);
        let part = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(part)?;
        match part.iter().rposition(|&b| b == b'\n') {
            Some(i) => {
                (end, found) = (start + i as u64 + 1, true);
                break;
            }
            None => end = start,
        }
    }
    if !found && floor > 0 {
        // No entry is this long: not a torn line, not ours to cut.
        return Ok(0);
    }
    if end < len {
        file.set_len(end)?;
    }
    Ok(len - end)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn appends_one_json_line_per_entry_with_the_seed_fields() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&dir.path().join("agent_actions.jsonl")).unwrap();
        for status in [Status::Success, Status::Failed] {
            j.append(&Entry {
                timestamp: 1_738_439_400,
                action_type: "create_file".into(),
                filepath: Some("a.txt".into()),
                reason: Some("why".into()),
                status,
                details: "done".into(),
                action_id: "act_1".into(),
                attempt: 1,
                agent: None,
            });
        }
        let text = std::fs::read_to_string(j.path()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["status"], "success");
        assert_eq!(lines[1]["status"], "failed");
        for k in [
            "timestamp",
            "action_type",
            "filepath",
            "reason",
            "status",
            "details",
            "action_id",
            "attempt",
        ] {
            assert!(lines[0].get(k).is_some(), "{k}");
        }
    }

    #[test]
    fn a_line_torn_by_a_crash_is_cut_off_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent_actions.jsonl");
        let whole = format!("{{\"details\":\"{}\"}}\n", "x".repeat(9000));
        for (before, kept) in [
            (String::new(), String::new()),
            (whole.clone(), whole.clone()),
            (format!("{whole}{{\"timestamp\":17"), whole.clone()),
            ("{\"a\":".repeat(2000), String::new()),
        ] {
            std::fs::write(&path, &before).unwrap();
            let j = Journal::open(&path).unwrap();
            j.append(&Entry {
                timestamp: 1,
                action_type: "create_file".into(),
                filepath: None,
                reason: None,
                status: Status::Success,
                details: "done".into(),
                action_id: "act_2".into(),
                attempt: 1,
                agent: None,
            });
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.starts_with(&kept), "{before:.40}");
            let last = &text[kept.len()..];
            let v: serde_json::Value = serde_json::from_str(last.trim_end()).unwrap();
            assert_eq!(v["action_id"], "act_2");
        }
        // A journal that is no file (a pipe, a terminal) is written as is.
        assert!(Journal::open(Path::new("/dev/null")).is_ok());
    }
}
