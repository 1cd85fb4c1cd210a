//! `actiongate tail`: follows `GET /v1/events` (Server-Sent Events), one
//! line per event, reconnecting with backoff and resuming from the last
//! event id it printed (`Last-Event-ID`), so nothing is missed or repeated.

use std::time::Duration;

use clap::Args;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;

use super::http::{Api, ClientError, Problem, query_value, report};
use super::output::{clip, one_line, s};
use super::{Common, Exit};

/// Flags of `tail`.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// Connection and output (`--json`: the event objects, one per line).
    #[command(flatten)]
    pub common: Common,
    /// Comma-separated event types or `prefix.*` patterns, e.g. `action.*,grant.created`.
    #[arg(long)]
    pub types: Option<String>,
    /// Start after this event seq (replays what came after it) instead of now.
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// Exit after printing this many events.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// The longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// The first wait.
const MIN_BACKOFF: Duration = Duration::from_millis(250);
/// No byte for this long (not even a heartbeat): the connection is dead.
const READ_TIMEOUT: Duration = Duration::from_secs(90);

/// One event as a line: time, seq, type and what it is about.
pub fn event_line(seq: &str, kind: &str, ev: &Value) -> String {
    let at = s(ev, "at");
    // Seconds are precise enough to read.
    let at = at.get(..19).map_or(at.to_owned(), |t| format!("{t}Z"));
    let data = ev.get("data").unwrap_or(&Value::Null);
    let what = if let Some(action_id) = ev.get("action_id").and_then(Value::as_str) {
        let mut w = format!(
            "{action_id} {} {}",
            clip(s(ev, "agent"), 30),
            clip(s(data, "action_string"), 120)
        );
        if let Some(note) = data.get("decision_note").and_then(Value::as_str) {
            w.push_str(&format!(" — {}", clip(note, 120)));
        } else if (kind == "action.denied" || kind == "action.enqueued")
            && let Some(r) = data.pointer("/decision/reason").and_then(Value::as_str)
        {
            w.push_str(&format!(" — {}", clip(r, 120)));
        }
        w
    } else if kind == "action.undecided" {
        // A run no decision covered: whose, what, in which session.
        let mut w = format!(
            "{} {}",
            clip(s(ev, "agent"), 30),
            clip(s(data, "action_string"), 120)
        );
        if let Some(session) = data.get("session").and_then(Value::as_str) {
            w.push_str(&format!(" (session {})", clip(session, 60)));
        }
        w
    } else if let Some(grant_id) = ev.get("grant_id").and_then(Value::as_str) {
        // The agent column as for actions: the grant's agent, `*` for all.
        let agent = [ev.get("agent"), data.get("agent")]
            .into_iter()
            .flatten()
            .find_map(Value::as_str)
            .unwrap_or("*");
        format!(
            "{grant_id} {} {}",
            clip(agent, 30),
            clip(&super::output::grant_target(data), 120)
        )
    } else {
        clip(&data.to_string(), 160)
    };
    format!("{at} {seq:>7} {:<18} {what}", one_line(kind))
}

enum Ended {
    /// Stop following with this exit code.
    Stop(Exit),
    /// Reconnect (after the backoff); the text says why.
    Retry(String),
}

/// `tail`: follows the event stream until interrupted (or `--count`).
pub async fn tail(args: TailArgs) -> Exit {
    let api = match Api::new(&args.common.conn).and_then(|a| a.require_key().map(|()| a)) {
        Ok(a) => a,
        Err(e) => return report(&e),
    };
    crate::install_tls_provider();
    let http = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .read_timeout(READ_TIMEOUT)
        .build()
    {
        Ok(h) => h,
        Err(e) => {
            return report(&ClientError::Usage(format!(
                "cannot build an HTTP client: {e}"
            )));
        }
    };
    let mut path = format!("{}/v1/events", api.base());
    if let Some(t) = &args.types {
        path.push_str(&format!("?types={}", query_value(t)));
    }
    let mut last_id: Option<String> = args.after.map(|a| a.to_string());
    let mut printed = 0u64;
    let mut backoff = MIN_BACKOFF;
    loop {
        match follow_once(
            &api,
            &http,
            &path,
            &args,
            &mut last_id,
            &mut printed,
            &mut backoff,
        )
        .await
        {
            Ended::Stop(exit) => return exit,
            Ended::Retry(why) => {
                eprintln!(
                    "actiongate tail: {}; reconnecting in {:.1}s{}",
                    one_line(&why),
                    backoff.as_secs_f64(),
                    last_id
                        .as_deref()
                        .map(|id| format!(" (resuming after {id})"))
                        .unwrap_or_default()
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

async fn follow_once(
    api: &Api,
    http: &reqwest::Client,
    url: &str,
    args: &TailArgs,
    last_id: &mut Option<String>,
    printed: &mut u64,
    backoff: &mut Duration,
) -> Ended {
    let mut req = http
        .get(url)
        .header(reqwest::header::ACCEPT, "text/event-stream");
    if let Some(k) = api.key() {
        req = req.bearer_auth(k);
    }
    if let Some(id) = last_id.as_deref() {
        req = req.header("Last-Event-ID", id);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return Ended::Retry(api.unreachable(&e).to_string()),
    };
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        let err = ClientError::Api(Box::new(Problem::from_body(status, &body)));
        if err.is_transient() {
            return Ended::Retry(err.to_string());
        }
        return Ended::Stop(report(&err));
    }
    // Where this stream starts: a drop before any event resumes there, not
    // from the newest event at the next connection.
    if let Some(after) = resp
        .headers()
        .get("actiongate-resume-after")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
    {
        *last_id = Some(after.to_owned());
    }
    let mut stream = resp.bytes_stream().eventsource();
    let mut connected = false;
    while let Some(item) = stream.next().await {
        let ev = match item {
            Ok(ev) => ev,
            Err(e) => return Ended::Retry(format!("the stream broke: {e}")),
        };
        if !connected {
            // Something arrived: the connection works, so the next failure
            // starts the backoff afresh.
            connected = true;
            *backoff = MIN_BACKOFF;
        }
        if ev.event == "reset" {
            let data: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
            eprintln!(
                "actiongate tail: the daemon no longer has the events after {} ({}); continuing from seq {}",
                data.get("last_event_id")
                    .map_or("?".to_owned(), Value::to_string),
                one_line(s(&data, "reason")),
                data.get("oldest_seq")
                    .map_or("?".to_owned(), Value::to_string),
            );
            if !ev.id.is_empty() {
                *last_id = Some(ev.id);
            }
            continue;
        }
        if ev.data.is_empty() {
            continue;
        }
        if !ev.id.is_empty() {
            *last_id = Some(ev.id.clone());
        }
        if args.common.json {
            println!("{}", ev.data.trim());
        } else {
            let data: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
            let kind = if ev.event.is_empty() {
                "message"
            } else {
                &ev.event
            };
            println!("{}", event_line(&ev.id, kind, &data));
        }
        *printed += 1;
        if args.count.is_some_and(|n| *printed >= n) {
            return Ended::Stop(Exit::Ok);
        }
    }
    if !connected {
        *backoff = (*backoff).max(MIN_BACKOFF);
    }
    Ended::Retry("the stream ended".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn action_events_read_as_one_line() {
        let ev = json!({
            "seq": 7, "type": "action.denied", "at": "2026-11-22T10:00:00.123456Z",
            "agent": "coder", "action_id": "0193-x",
            "data": {"action_string": "tool:bash:rm -rf /\nx", "decision_note": "no way"}
        });
        assert_eq!(
            event_line("7", "action.denied", &ev),
            "2026-11-22T10:00:00Z       7 action.denied      0193-x coder tool:bash:rm -rf /⏎x — no way"
        );
        let run = json!({
            "seq": 8, "type": "action.undecided", "at": "2026-11-22T10:00:01Z", "agent": "coder",
            "data": {"agent": "coder", "action_string": "tool:bash:make ship", "session": "s1"}
        });
        assert_eq!(
            event_line("8", "action.undecided", &run),
            "2026-11-22T10:00:01Z       8 action.undecided   coder tool:bash:make ship (session s1)"
        );
        // A grant's line has the agent column too: its agent, or `*`.
        let grant = |agent: Value| {
            json!({"seq": 9, "type": "grant.created", "at": "2026-11-22T10:00:02Z",
                "grant_id": "grt_1", "data": {"agent": agent, "handler": "fs",
                "permission": "fs.write", "scope": {"path": "www/*"}}})
        };
        assert_eq!(
            event_line("9", "grant.created", &grant(json!("coder"))),
            "2026-11-22T10:00:02Z       9 grant.created      grt_1 coder fs/fs.write {\"path\":\"www/*\"}"
        );
        assert!(event_line("9", "grant.created", &grant(Value::Null)).contains("grt_1 * fs/"));
    }
}
