//! `actiongate sessions [ID] [--end]`: the tasks agents' actions belong
//! to (docs/sessions.md). Without an id, the sessions the key may see,
//! newest first (the newest page, or with `--all` every one), only active
//! or ended ones and only one agent's when asked; with one, that session
//! and its actions, oldest first; with `--end`, the session is ended (its
//! grants are void).

use clap::Args;
use serde_json::Value;

use super::http::{Api, ClientError, path_segment, query_value, report};
use super::output::{clip, or_dash, relative, s, table, when};
use super::{Common, Exit};

/// Flags of `sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// One session: it and its actions.
    pub id: Option<String>,
    /// End the session ID (its agent's key or an operator's): its grants
    /// are void from then on.
    #[arg(long, requires = "id")]
    pub end: bool,
    /// Only active sessions, or only ended ones.
    #[arg(long, value_parser = ["active", "ended"], conflicts_with = "id")]
    pub status: Option<String>,
    /// Only this agent's sessions.
    #[arg(long, conflicts_with = "id")]
    pub agent: Option<String>,
    /// Every session, not only the newest page (up to 10,000).
    #[arg(long, conflicts_with = "id")]
    pub all: bool,
}

/// Sessions on one page of the listing.
const PAGE: usize = 200;
/// Most sessions `--all` reads.
const MOST: usize = 10_000;

/// Runs `sessions`.
pub async fn run(a: SessionsArgs) -> Exit {
    match sessions(&a).await {
        Ok(exit) => exit,
        Err(e) => report(&e),
    }
}

async fn sessions(a: &SessionsArgs) -> Result<Exit, ClientError> {
    let api = Api::new(&a.common.conn)?;
    api.require_key()?;
    let Some(id) = &a.id else {
        return list(&api, a).await;
    };
    let path = format!("/v1/sessions/{}", path_segment(id));
    let session = if a.end {
        api.post(&format!("{path}/end"), &Value::Null).await?
    } else {
        api.get(&path).await?
    };
    let actions = actions_of(&api, id).await?;
    if a.common.json {
        let mut out = session.clone();
        out["items"] = Value::Array(actions);
        print_pretty(&out);
        return Ok(Exit::Ok);
    }
    println!(
        "session {}  agent {}  {}  runtime {}",
        s(&session, "id"),
        s(&session, "agent"),
        s(&session, "status"),
        or_dash(&session, "runtime")
    );
    println!(
        "first seen {}, last seen {}",
        when(&session, "first_seen"),
        when(&session, "last_seen")
    );
    if let Some(by) = session.get("tainted_by").and_then(Value::as_str) {
        println!(
            "tainted by {by} ({}): ways out are asked",
            clip(s(&session, "taint_action"), 80)
        );
    }
    if actions.is_empty() {
        println!("no actions");
        return Ok(Exit::Ok);
    }
    let rows: Vec<Vec<String>> = actions
        .iter()
        .map(|x| {
            vec![
                s(x, "id").to_owned(),
                relative(x, "created_at"),
                s(x, "status").to_owned(),
                clip(s(x, "action_string"), 70),
                or_dash(x, "decided_by"),
            ]
        })
        .collect();
    print!(
        "{}",
        table(&["ID", "ASKED", "STATUS", "ACTION", "BY"], &rows)
    );
    Ok(Exit::Ok)
}

/// The sessions `a` asks for, newest first: one page, or with `--all`
/// every page (up to [`MOST`]).
async fn read_list(api: &Api, a: &SessionsArgs) -> Result<(Vec<Value>, bool), ClientError> {
    let mut path = format!("/v1/sessions?limit={PAGE}");
    if let Some(st) = &a.status {
        path.push_str(&format!("&status={}", query_value(st)));
    }
    if let Some(agent) = &a.agent {
        path.push_str(&format!("&agent={}", query_value(agent)));
    }
    let mut all: Vec<Value> = Vec::new();
    loop {
        let mut page_path = path.clone();
        // Placed by when the last one began too, so that the page is
        // found if that session is deleted meanwhile.
        if let Some(last) = all.last() {
            for (param, field) in [("after", "id"), ("began", "first_seen")] {
                if let Some(v) = last[field].as_str() {
                    page_path.push_str(&format!("&{param}={}", query_value(v)));
                }
            }
        }
        let items = api
            .get(&page_path)
            .await?
            .as_array()
            .cloned()
            .unwrap_or_default();
        let short = items.len() < PAGE;
        all.extend(items);
        if short {
            return Ok((all, false));
        }
        if !a.all || all.len() >= MOST {
            return Ok((all, true));
        }
    }
}

async fn list(api: &Api, a: &SessionsArgs) -> Result<Exit, ClientError> {
    let (items, more) = read_list(api, a).await?;
    if more {
        let hint = if a.all { "" } else { "; --all lists every one" };
        eprintln!("the newest {} sessions{hint}", items.len());
    }
    if a.common.json {
        print_pretty(&Value::Array(items));
        return Ok(Exit::Ok);
    }
    if items.is_empty() {
        println!("no sessions");
        return Ok(Exit::Ok);
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|x| {
            vec![
                clip(s(x, "id"), 40),
                clip(s(x, "agent"), 20),
                s(x, "status").to_owned(),
                relative(x, "last_seen"),
                x["actions"]["total"].as_i64().unwrap_or(0).to_string(),
                if x.get("tainted_by").is_some_and(|t| !t.is_null()) {
                    "tainted".to_owned()
                } else {
                    "-".to_owned()
                },
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "SESSION",
                "AGENT",
                "STATUS",
                "LAST SEEN",
                "ACTIONS",
                "TAINT"
            ],
            &rows
        )
    );
    Ok(Exit::Ok)
}

/// Every action of session `id`, oldest first.
async fn actions_of(api: &Api, id: &str) -> Result<Vec<Value>, ClientError> {
    api.all_pages(&format!(
        "/v1/actions?session={}&limit=200",
        query_value(id)
    ))
    .await
}

fn print_pretty(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}
