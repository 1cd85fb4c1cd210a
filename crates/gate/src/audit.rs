//! The audit export: the event log as JSON lines chained by hashes (see
//! `actiongate_store::audit` for the chain), ending in a final anchor line
//! signed with the daemon's audit key; and the strict check of an export.
//! `GET /v1/audit` and `actiongate audit export` both stream [`export`].

use chrono::{DateTime, Utc};
use futures::Stream;

pub use actiongate_store::audit::Anchor;
use actiongate_store::audit::audit_line;
use actiongate_store::audit_verify::end_line;
pub use actiongate_store::audit_verify::{Report, VerifyOptions};

use crate::GateError;
use crate::events::EventLog;

/// Most events read per query; the first query reads
/// [`FIRST_PAGE`], later ones as many as hold about [`PAGE_BYTES`] (events
/// can be large: an agent's detail and params).
const PAGE: i64 = 1000;
const FIRST_PAGE: i64 = 16;
const PAGE_BYTES: usize = 1024 * 1024;

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

/// The export as a stream of chunks of whole lines, each line ending in a
/// newline.
pub fn export(log: EventLog, range: Range) -> impl Stream<Item = Result<String, GateError>> {
    async_stream::try_stream! {
        // Events committed later are not part of this export.
        let newest = log.last_seq();
        let first = match range.since {
            Some(t) => log.first_seq_since(t).await?,
            None => Some(0),
        };
        let end = match range.until {
            Some(t) => log.first_seq_since(t).await?.unwrap_or(i64::MAX),
            None => i64::MAX,
        }
        .min(newest.saturating_add(1));
        if let Some(first) = first {
            // The chain is computed from the anchor; if pruning moved the
            // anchor while the first page was read, read it again.
            let (anchor, mut page) = loop {
                let anchor = log.audit_anchor().await?;
                let page = log.events_after(anchor.seq, None, FIRST_PAGE).await?;
                if log.audit_anchor().await? == anchor {
                    break (anchor, page);
                }
            };
            let mut prev = anchor.hash;
            let mut exported = 0usize;
            let mut last_line = Anchor::default();
            let mut size = FIRST_PAGE;
            'pages: while let Some(last) = page.last().map(|e| e.seq) {
                let mut chunk = String::new();
                for ev in &page {
                    if ev.seq >= end {
                        if !chunk.is_empty() {
                            yield chunk;
                        }
                        break 'pages;
                    }
                    let (line, hash) = audit_line(ev, &prev)?;
                    if ev.seq >= first {
                        chunk.push_str(&line);
                        chunk.push('\n');
                        exported += 1;
                        last_line = Anchor { seq: ev.seq, hash: hash.clone() };
                    }
                    prev = hash;
                }
                if !chunk.is_empty() {
                    yield chunk;
                }
                let bytes = page.iter().map(|ev| ev.data.get().len()).sum();
                size = crate::events::next_events_page(size, bytes, PAGE_BYTES, PAGE);
                page = log.events_after(last, None, size).await?;
            }
            if exported > 0 {
                let mut end = end_line(exported, &last_line, log.audit_key());
                end.push('\n');
                yield end;
            }
        }
    }
}

/// Checks an export strictly (see `actiongate_store::audit_verify`); the
/// error names the first bad line (1-based; 0 for an empty file).
pub fn verify(
    reader: impl std::io::BufRead,
    opts: &VerifyOptions,
) -> Result<Report, (usize, String)> {
    actiongate_store::audit_verify::verify(reader.lines(), opts)
}
