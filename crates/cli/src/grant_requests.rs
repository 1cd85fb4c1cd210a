//! `actiongate grant-requests` and `actiongate grant-request approve|deny`
//! (operator key): the permissions agents asked a human for
//! (`POST /v1/grant-requests`). Approving makes the grant, narrowed to a
//! smaller scope or a sooner expiry when given.

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::commands::{api, guarded, print_json, scope_map};
use super::http::{path_segment, query_value};
use super::output::{clip, grant_target, one_line, relative, s, table};
use super::{Common, Exit, parse_scope};

/// Flags of `grant-requests`.
#[derive(Debug, Args)]
pub struct GrantRequestsArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Only requests in this status (default: pending, oldest first).
    #[arg(long, value_parser = ["pending", "approved", "denied", "expired", "all"], default_value = "pending")]
    pub status: String,
}

/// `grant-request approve|deny`.
#[derive(Debug, Subcommand)]
pub enum GrantRequestCommand {
    /// Approve a request: the grant is made (as asked, or narrower).
    Approve(GrantRequestApproveArgs),
    /// Deny a request; the agent sees the reason.
    Deny(GrantRequestDenyArgs),
}

/// Flags of `grant-request approve`.
#[derive(Debug, Args)]
pub struct GrantRequestApproveArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Grant request id.
    pub id: String,
    /// A scope within the one asked for (repeatable; default: as asked).
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_scope)]
    pub scope: Vec<(String, Value)>,
    /// An expiry no later than the one asked for (`1h`, `today`, RFC 3339;
    /// default: as asked).
    #[arg(long)]
    pub expires: Option<String>,
}

/// Flags of `grant-request deny`.
#[derive(Debug, Args)]
pub struct GrantRequestDenyArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Grant request id.
    pub id: String,
    /// Why (the agent sees it).
    #[arg(long)]
    pub reason: Option<String>,
}

/// Runs `grant-request approve|deny`.
pub async fn run(cmd: GrantRequestCommand) -> Exit {
    match cmd {
        GrantRequestCommand::Approve(a) => approve(a).await,
        GrantRequestCommand::Deny(a) => deny(a).await,
    }
}

/// Requests read at a time.
const PAGE: usize = 500;

/// Most pending requests `grant-requests` reads.
const MOST_PENDING: usize = 10_000;

/// What a request asks for, on one line: `handler/permission {scope}`,
/// then its limits.
fn asked(r: &Value) -> String {
    let mut text = grant_target(r);
    for (key, label) in [("session", "session"), ("uses", "uses")] {
        match r.get(key) {
            Some(Value::String(v)) => text.push_str(&format!(" ({label} {})", one_line(v))),
            Some(Value::Number(n)) => text.push_str(&format!(" ({label} {n})")),
            _ => {}
        }
    }
    text
}

/// `grant-requests [--status S]`: every pending request oldest first (what
/// waits longest first, as `pending`), otherwise the newest [`PAGE`].
pub async fn grant_requests(args: GrantRequestsArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let pending = args.status == "pending";
        let mut path = "/v1/grant-requests?".to_owned();
        if args.status != "all" {
            path.push_str(&format!("status={}&", query_value(&args.status)));
        }
        let list = if pending {
            let oldest = format!("{path}order=oldest&limit={PAGE}");
            Value::Array(api.after_pages(&oldest, PAGE, MOST_PENDING).await?)
        } else {
            api.get(&format!("{path}limit={PAGE}")).await?
        };
        if args.common.json {
            print_json(&list);
            return Ok(Exit::Ok);
        }
        let items = list.as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            println!("no grant requests");
            return Ok(Exit::Ok);
        }
        print_requests(&items);
        Ok(Exit::Ok)
    })
    .await
}

/// Grant requests as a table, then what each one asks for whole when the
/// table cut it: a scope cut there (`/srv/…`) may end in what matters
/// (`/../../**`).
pub(crate) fn print_requests(items: &[Value]) {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|r| {
            vec![
                s(r, "id").to_owned(),
                relative(r, "created_at"),
                clip(s(r, "agent"), 20),
                s(r, "status").to_owned(),
                clip(&asked(r), 60),
                clip(s(r, "expires"), 24),
                clip(s(r, "reason"), 40),
            ]
        })
        .collect();
    let head = [
        "ID",
        "ASKED",
        "AGENT",
        "STATUS",
        "PERMISSION",
        "EXPIRES",
        "REASON",
    ];
    print!("{}", table(&head, &rows));
    for r in items {
        let full = asked(r);
        if one_line(&full).chars().count() > 60 {
            println!("{} asks for: {}", s(r, "id"), one_line(&full));
        }
    }
}

/// The line a decided request prints.
fn summary(r: &Value) -> String {
    match (s(r, "status"), r.get("grant")) {
        ("approved", Some(g)) => format!(
            "grant request {} approved: grant {} {} for {} until {}",
            s(r, "id"),
            s(g, "id"),
            grant_target(g),
            one_line(
                g.get("agent")
                    .and_then(Value::as_str)
                    .unwrap_or("any agent")
            ),
            g.get("expires_at")
                .and_then(Value::as_str)
                .unwrap_or("it is revoked")
        ),
        (status, _) => format!("grant request {} {status}", s(r, "id")),
    }
}

/// `grant-request approve ID [--scope k=v]… [--expires E]`.
pub async fn approve(args: GrantRequestApproveArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let mut body = Map::new();
        if !args.scope.is_empty() {
            body.insert(
                "scope".to_owned(),
                Value::Object(scope_map(args.scope.clone())?),
            );
        }
        if let Some(e) = &args.expires {
            body.insert("expires".to_owned(), json!(e));
        }
        let path = format!("/v1/grant-requests/{}/approve", path_segment(&args.id));
        // As asked, the daemon knows it sent again; narrowed, it is sent once.
        let r = if body.is_empty() {
            api.post_decision(&path, &Value::Object(body)).await?
        } else {
            api.post(&path, &Value::Object(body)).await?
        };
        if args.common.json {
            print_json(&r);
        } else {
            println!("{}", summary(&r));
        }
        Ok(Exit::Ok)
    })
    .await
}

/// `grant-request deny ID [--reason R]`.
pub async fn deny(args: GrantRequestDenyArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let body = match &args.reason {
            Some(r) => json!({ "reason": r }),
            None => json!({}),
        };
        let r = api
            .post_decision(
                &format!("/v1/grant-requests/{}/deny", path_segment(&args.id)),
                &body,
            )
            .await?;
        if args.common.json {
            print_json(&r);
        } else {
            println!("{}", summary(&r));
        }
        Ok(Exit::Ok)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_as_what_it_asks_and_how_it_ended() {
        let r = json!({"id": "gr_1", "status": "pending", "handler": "fs",
            "permission": "fs.write", "scope": {"path": "/srv/www/*"},
            "session": "job\n7", "uses": 3});
        assert_eq!(
            asked(&r),
            "fs/fs.write {\"path\":\"/srv/www/*\"} (session job⏎7) (uses 3)"
        );
        let done = json!({"id": "gr_1", "status": "approved", "grant": {"id": "grt_9",
            "handler": "fs", "permission": "fs.write", "scope": {"path": "/srv/www/a"},
            "agent": "coder", "expires_at": "2026-12-05T15:00:00Z"}});
        assert_eq!(
            summary(&done),
            "grant request gr_1 approved: grant grt_9 fs/fs.write {\"path\":\"/srv/www/a\"} \
             for coder until 2026-12-05T15:00:00Z"
        );
        assert_eq!(
            summary(&json!({"id": "gr_2", "status": "denied"})),
            "grant request gr_2 denied"
        );
    }
}
