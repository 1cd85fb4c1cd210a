//! Submitting an outbox line's actions to the daemon until it answers, and
//! appending each outcome to the status file.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::line::{self, Item, LineId};
use super::log;
use crate::http::{Api, ClientError};

/// One status-file record.
struct Record<'a> {
    line: u64,
    index: Option<usize>,
    action_type: Option<&'a str>,
    filepath: Option<&'a str>,
    action_id: Option<&'a str>,
    status: &'a str,
    details: String,
}

/// The longest tail [`open_status`] takes for a torn record.
const MAX_TORN: u64 = 16 << 20;

/// Opens the status file for appending, first cutting off a record torn by
/// a crash (a kill can stop a write between pages). Its line was not saved
/// as handled, so it is submitted again under the same idempotency key and
/// recorded whole; the file stays one JSON value per line.
pub fn open_status(path: &Path) -> std::io::Result<File> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        // A pipe or a terminal: nothing to read back.
        return Ok(file);
    }
    let len = meta.len();
    let floor = len.saturating_sub(MAX_TORN);
    let (mut end, mut found) = (len, false);
    let mut chunk = vec![0u8; 8192];
    while end > floor {
        let start = end.saturating_sub(chunk.len() as u64).max(floor);
        let part = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(part)?;
        if let Some(i) = part.iter().rposition(|&b| b == b'\n') {
            (end, found) = (start + i as u64 + 1, true);
            break;
        }
        end = start;
    }
    if !found && floor > 0 {
        // No record is this long: not a torn record, not ours to cut.
        log("the status file does not end with a whole line; appending after it");
        return Ok(file);
    }
    if end < len {
        log(&format!(
            "cut off a status record torn by a crash ({} bytes)",
            len - end
        ));
        file.set_len(end)?;
    }
    Ok(file)
}

/// Where a line's actions go: the daemon, then the status file.
pub struct Sink {
    /// The daemon.
    pub api: Api,
    /// How long to wait for each action to settle before recording it.
    pub wait: Duration,
    /// The status file, opened for appending.
    pub status: File,
    /// The handler that runs the actions.
    pub handler: String,
    /// Whether demo and template actions are submitted too.
    pub include_demo: bool,
}

impl Sink {
    /// Handles one line; whether anything was sent to the daemon.
    pub async fn handle_line(&mut self, id: LineId, content: &[u8]) -> bool {
        let line_no = id.line;
        let items = match line::parse(id, content, &self.handler, self.include_demo) {
            Ok(None) => return false,
            Ok(Some(items)) => items,
            Err(why) => {
                log(&format!("line {line_no}: skipped: {why}"));
                self.record(Record {
                    line: line_no,
                    index: None,
                    action_type: None,
                    filepath: None,
                    action_id: None,
                    status: "invalid",
                    details: why,
                });
                return false;
            }
        };
        let mut submitted = false;
        for (index, item) in items.into_iter().enumerate() {
            match item {
                Item::Submit {
                    action_type,
                    filepath,
                    body,
                } => {
                    submitted = true;
                    self.submit(line_no, index, &action_type, filepath.as_deref(), &body)
                        .await;
                }
                Item::Skip {
                    action_type,
                    filepath,
                    why,
                } => self.record(Record {
                    line: line_no,
                    index: Some(index),
                    action_type: action_type.as_deref(),
                    filepath: filepath.as_deref(),
                    action_id: None,
                    status: "skipped",
                    details: why,
                }),
                Item::Invalid {
                    action_type,
                    filepath,
                    why,
                } => {
                    log(&format!("line {line_no} action {index}: skipped: {why}"));
                    self.record(Record {
                        line: line_no,
                        index: Some(index),
                        action_type: action_type.as_deref(),
                        filepath: filepath.as_deref(),
                        action_id: None,
                        status: "invalid",
                        details: why,
                    });
                }
            }
        }
        submitted
    }

    /// Submits one action until the daemon answers for it, and records the
    /// answer. Transient failures (unreachable, 5xx, 401/403 while keys are
    /// sorted out) are retried for ever: an action is never skipped for them.
    async fn submit(
        &mut self,
        line_no: u64,
        index: usize,
        action_type: &str,
        filepath: Option<&str>,
        body: &Value,
    ) {
        let mut backoff = Duration::from_millis(250);
        let wait = self.wait;
        let answer = loop {
            match self.api.create_action(body, wait).await {
                Ok(ok) => break Ok(ok),
                Err(e) if e.is_transient() || is_auth(&e) => {
                    log(&format!(
                        "line {line_no} action {index}: {e}; retrying in {:.1}s",
                        backoff.as_secs_f64()
                    ));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
                Err(e) => break Err(e),
            }
        };
        match answer {
            Ok((action, created)) => {
                let status = action.get("status").and_then(Value::as_str).unwrap_or("");
                let id = action.get("id").and_then(Value::as_str);
                let mut details = action
                    .get("decision_note")
                    .and_then(Value::as_str)
                    .or_else(|| action.pointer("/decision/reason").and_then(Value::as_str))
                    .unwrap_or("")
                    .to_owned();
                if !created {
                    details.push_str(" (submitted before; the same action)");
                }
                log(&format!(
                    "line {line_no} action {index}: {action_type} {} -> {status} ({})",
                    filepath.unwrap_or(""),
                    id.unwrap_or("")
                ));
                self.record(Record {
                    line: line_no,
                    index: Some(index),
                    action_type: Some(action_type),
                    filepath,
                    action_id: id,
                    status,
                    details,
                });
            }
            Err(e) => {
                log(&format!("line {line_no} action {index}: rejected: {e}"));
                self.record(Record {
                    line: line_no,
                    index: Some(index),
                    action_type: Some(action_type),
                    filepath,
                    action_id: None,
                    status: "rejected",
                    details: e.to_string(),
                });
            }
        }
    }

    fn record(&mut self, r: Record<'_>) {
        let timestamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let rec = json!({
            "timestamp": timestamp,
            "line": r.line,
            "index": r.index,
            "action_type": r.action_type,
            "filepath": r.filepath,
            "action_id": r.action_id,
            "status": r.status,
            "details": r.details,
        });
        let mut bytes = rec.to_string().into_bytes();
        bytes.push(b'\n');
        // One write per record, so records never interleave.
        if let Err(e) = self.status.write_all(&bytes) {
            log(&format!("cannot write the status file: {e}"));
        }
    }
}

fn is_auth(e: &ClientError) -> bool {
    matches!(e, ClientError::Api(p) if p.status == 401 || p.status == 403)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_torn_record_is_cut_off_and_whole_ones_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.jsonl");
        let whole = format!("{{\"line\":1,\"details\":\"{}\"}}\n", "x".repeat(10_000));
        for (before, after) in [
            (String::new(), String::new()),
            (whole.clone(), whole.clone()),
            (format!("{whole}{{\"line\":2,\"det"), whole.clone()),
            ("{\"line\":1".repeat(3000), String::new()),
        ] {
            std::fs::write(&path, &before).unwrap();
            let mut f = open_status(&path).unwrap();
            f.write_all(b"{}\n").unwrap();
            drop(f);
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                format!("{after}{{}}\n")
            );
        }
        // A tail longer than any record is no torn record: it is kept.
        let foreign = "x".repeat((MAX_TORN + 1) as usize);
        std::fs::write(&path, &foreign).unwrap();
        drop(open_status(&path).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), MAX_TORN + 1);
    }
}
