//! Audit exports: the event log as JSON lines chained by hashes (see
//! `actiongate_store::audit` for the chain), streamed by `GET /v1/audit` and
//! written by `actiongate audit export`; and `actiongate audit verify`.

use std::io::BufRead;

use axum::body::Bytes;
use chrono::{DateTime, Utc};
use futures::Stream;

use actiongate_gate::events::EventLog;
use actiongate_store::StoreError;
use actiongate_store::audit::{Verifier, audit_line};

/// Events read per query.
const PAGE: i64 = 1000;

/// Which part of the log to export: events from the first one written at
/// or after `since` up to (not including) the first one written at or
/// after `until`, a contiguous run in seq order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Range {
    /// Start time.
    pub since: Option<DateTime<Utc>>,
    /// End time.
    pub until: Option<DateTime<Utc>>,
}

/// The export as a stream of lines, each ending in a newline.
pub fn export(store: EventLog, range: Range) -> impl Stream<Item = Result<Bytes, StoreError>> {
    async_stream::try_stream! {
        // Events committed later are not part of this export.
        let newest = store.last_seq();
        let first = match range.since {
            Some(t) => store.first_seq_since(t).await?,
            None => Some(0),
        };
        let end = match range.until {
            Some(t) => store.first_seq_since(t).await?.unwrap_or(i64::MAX),
            None => i64::MAX,
        }
        .min(newest.saturating_add(1));
        if let Some(first) = first {
            // The chain is computed from the anchor; if pruning moved the
            // anchor while the first page was read, read it again.
            let (anchor, mut page) = loop {
                let anchor = store.audit_anchor().await?;
                let page = store.events_after(anchor.seq, None, PAGE).await?;
                if store.audit_anchor().await? == anchor {
                    break (anchor, page);
                }
            };
            let mut prev = anchor.hash;
            'pages: while let Some(last) = page.last().map(|e| e.seq) {
                let mut chunk = String::new();
                for ev in &page {
                    if ev.seq >= end {
                        if !chunk.is_empty() {
                            yield Bytes::from(chunk);
                        }
                        break 'pages;
                    }
                    let (line, hash) = audit_line(ev, &prev)?;
                    if ev.seq >= first {
                        chunk.push_str(&line);
                        chunk.push('\n');
                    }
                    prev = hash;
                }
                if !chunk.is_empty() {
                    yield Bytes::from(chunk);
                }
                page = store.events_after(last, None, PAGE).await?;
            }
        }
    }
}

/// What a successful verification found.
#[derive(Debug)]
pub struct Verified {
    /// Lines checked.
    pub lines: usize,
    /// `prev_hash` of the first line: the anchor the export continues.
    pub first_prev: Option<String>,
    /// Hash of the last line.
    pub last_hash: Option<String>,
}

/// Checks an export; the error names the first bad line (1-based).
pub fn verify(reader: impl BufRead) -> Result<Verified, (usize, String)> {
    let mut v = Verifier::new();
    for (i, line) in reader.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| (n, format!("cannot read: {e}")))?;
        if line.trim().is_empty() {
            return Err((n, "empty line".to_owned()));
        }
        v.line(&line).map_err(|e| (n, e))?;
    }
    Ok(Verified {
        lines: v.lines,
        first_prev: v.first_prev.clone(),
        last_hash: v.last_hash().map(str::to_owned),
    })
}
