//! The request/response client commands: the operator's `pending`, `show`,
//! `approve`, `deny`, `reply`, `grant`, `grants`, `revoke`, and the agent's
//! `request` and `check`.

use std::time::Duration;

use actiongate_api::teams::Seen;
use actiongate_api::{ApproveBody, DenyBody, Remember, ReplyBody};
use serde_json::{Map, Value, json};

use super::args::{
    ApproveArgs, CheckArgs, DenyArgs, GrantArgs, GrantsArgs, PendingArgs, ReplyArgs, RequestArgs,
    RevokeArgs, ShowArgs,
};
use super::http::{Api, ClientError, exit_for_action, path_segment, query_value, report};
use super::output::{self, clip, one_line, or_dash, relative, s, table};
use super::{Common, Exit};

/// Builds the client, or reports why not.
pub(crate) fn api(common: &Common) -> Result<Api, ClientError> {
    let api = Api::new(&common.conn)?;
    api.require_key()?;
    Ok(api)
}

/// Runs `f` and turns its error into a one-line message and exit code.
pub(crate) async fn guarded<F>(f: F) -> Exit
where
    F: std::future::Future<Output = Result<Exit, ClientError>>,
{
    match f.await {
        Ok(exit) => exit,
        Err(e) => report(&e),
    }
}

pub(crate) fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

pub(crate) fn scope_map(pairs: Vec<(String, Value)>) -> Result<Map<String, Value>, ClientError> {
    let mut map = Map::new();
    for (k, v) in pairs {
        if map.insert(k.clone(), v).is_some() {
            return Err(ClientError::Usage(format!("--scope {k} given twice")));
        }
    }
    Ok(map)
}

/// `pending`: the queue, oldest first.
pub async fn pending(args: PendingArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let mut path = "/v1/actions?status=pending&limit=200".to_owned();
        if let Some(a) = &args.agent {
            path.push_str(&format!("&agent={}", query_value(a)));
        }
        // Oldest first, as a queue reads.
        let items = api.all_pages(&path).await?;
        if args.common.json {
            print_json(&Value::Array(items));
            return Ok(Exit::Ok);
        }
        // Grant requests and plans wait for the same humans: say so (of
        // the agent asked for), not list them. Best effort: the queue is
        // the answer (an agent's key may not list plans).
        let agent = args.agent.as_deref();
        let (requests, plans) = tokio::join!(
            waiting_too(
                &api,
                "/v1/grant-requests",
                500,
                agent,
                "grant request",
                "grant-requests"
            ),
            waiting_too(&api, "/v1/plans", 200, agent, "plan", "plans"),
        );
        let also: Vec<String> = [requests, plans].into_iter().flatten().collect();
        if items.is_empty() {
            println!("no pending actions");
            for line in &also {
                println!("{line}");
            }
            return Ok(Exit::Ok);
        }
        // Where any needs more than one approval, how far each has come.
        let team = items.iter().any(|a| needed(a) > 1);
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|a| {
                let mut row = vec![
                    s(a, "id").to_owned(),
                    relative(a, "created_at"),
                    clip(s(a, "agent"), 20),
                    clip(s(a, "action_string"), 60),
                    relative(a, "deadline"),
                ];
                if team {
                    row.push(approvals_cell(a));
                }
                row.push(clip(s(a, "reason"), 50));
                row
            })
            .collect();
        let mut head = vec!["ID", "ASKED", "AGENT", "ACTION", "EXPIRES"];
        if team {
            head.push("APPROVALS");
        }
        head.push("REASON");
        print!("{}", table(&head, &rows));
        for line in &also {
            println!("{line}");
        }
        Ok(Exit::Ok)
    })
    .await
}

/// "3 plans wait too: actiongate plans": how many pending items of the
/// listing at `path` (read `page` at a time, up to one page's worth, and
/// of `agent` when given) also wait for a human; `None` for none, or when
/// the caller may not list them.
async fn waiting_too(
    api: &Api,
    path: &str,
    page: usize,
    agent: Option<&str>,
    noun: &str,
    command: &str,
) -> Option<String> {
    let first = format!("{path}?status=pending&limit={page}");
    let items = api.after_pages(&first, page, page).await.ok()?;
    let n = items
        .iter()
        .filter(|r| agent.is_none_or(|a| s(r, "agent") == a))
        .count();
    let full = items.len() >= page;
    let line = match (n, full) {
        (0, false) => return None,
        (1, false) => format!("1 {noun} waits too"),
        (n, false) => format!("{n} {noun}s wait too"),
        // None of the agent's among the first page: others' fill it.
        (0, true) => format!("{page} or more {noun}s of other agents wait too"),
        (n, true) => format!("{n} or more {noun}s wait too"),
    };
    Some(format!("{line}: actiongate {command}"))
}

/// How many approvals action `a` needs (1 unless a rule asks more).
fn needed(a: &Value) -> u64 {
    a.get("approvals_required")
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// `1/2 ann` (approvals so far of those needed, and by whom); `-` for an
/// action one approval settles; ` edited` when an approver changed it.
fn approvals_cell(a: &Value) -> String {
    if needed(a) <= 1 {
        return "-".to_owned();
    }
    let approvals = a
        .get("approvals")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let who: Vec<&str> = approvals
        .iter()
        .filter_map(|x| x.get("who").and_then(Value::as_str))
        .collect();
    let mut cell = format!("{}/{}", approvals.len(), needed(a));
    if !who.is_empty() {
        cell.push(' ');
        cell.push_str(&clip(&who.join(","), 30));
    }
    if a.get("edited").and_then(Value::as_bool) == Some(true) {
        cell.push_str(" edited");
    }
    cell
}

/// `show ID`.
pub async fn show(args: ShowArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        // A plan's and a grant request's id say what they are; any other
        // is an action's.
        let id = path_segment(&args.id);
        let (path, kind) = if args.id.starts_with("pln_") {
            (format!("/v1/plans/{id}"), Shown::Plan)
        } else if args.id.starts_with("grq_") {
            (format!("/v1/grant-requests/{id}"), Shown::GrantRequest)
        } else {
            (format!("/v1/actions/{id}"), Shown::Action)
        };
        let item = api.get(&path).await?;
        if args.common.json {
            print_json(&item);
            return Ok(Exit::Ok);
        }
        match kind {
            Shown::Plan => super::plans::print_plan(&item),
            Shown::GrantRequest => super::grant_requests::print_requests(&[item]),
            Shown::Action => print!("{}", output::action_details(&item)),
        }
        Ok(Exit::Ok)
    })
    .await
}

/// What `show` was given the id of.
enum Shown {
    Action,
    Plan,
    GrantRequest,
}

/// Prints a decided action and returns success.
fn decided(common: &Common, action: &Value) -> Exit {
    if common.json {
        print_json(action);
    } else {
        println!("{}", output::action_line(action));
    }
    Exit::Ok
}

/// A request body as JSON, fields left unset left out.
fn to_body<T: serde::Serialize>(body: &T) -> Result<Value, ClientError> {
    let mut v = serde_json::to_value(body).map_err(|e| ClientError::Usage(e.to_string()))?;
    if let Value::Object(map) = &mut v {
        map.retain(|_, v| !v.is_null());
        for (_, inner) in map.iter_mut() {
            if let Value::Object(m) = inner {
                m.retain(|_, v| !v.is_null());
            }
        }
    }
    Ok(v)
}

/// `approve ID [--remember EXPIRY [--scope k=v]… | --pattern P]`.
pub async fn approve(args: ApproveArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let remember = match &args.remember {
            None => None,
            Some(expires) => Some(Remember {
                expires: expires.clone(),
                scope: if args.scope.is_empty() {
                    None
                } else {
                    Some(scope_map(args.scope.clone())?)
                },
                pattern: args.pattern.clone(),
                agent: args.agent.clone(),
                session: None,
                uses: None,
            }),
        };
        let params = match &args.params {
            None => None,
            Some(text) => Some(
                serde_json::from_str::<Value>(text)
                    .ok()
                    .filter(Value::is_object)
                    .ok_or_else(|| {
                        ClientError::Usage("--params must be a JSON object".to_owned())
                    })?,
            ),
        };
        let body = to_body(&ApproveBody {
            note: args.note.clone(),
            remember,
            params,
            detail: args.detail.clone(),
            seen: Some(if args.edited {
                Seen::Edited
            } else {
                Seen::Asked
            }),
        })?;
        let path = format!("/v1/actions/{}/approve", path_segment(&args.id));
        // A plain approval sent again is answered as the action stands; one
        // that grants or edits is sent once.
        let plain = args.remember.is_none() && args.params.is_none() && args.detail.is_none();
        let sent = if plain {
            api.post_decision(&path, &body).await
        } else {
            api.post(&path, &body).await
        };
        let action = sent.map_err(|e| match e {
                // Refused because another approver edited it: say how to
                // approve what will run.
                ClientError::Api(mut p)
                    if p.status == 409 && !args.edited && p.detail.contains(" edited this action") =>
                {
                    p.detail.push_str(&format!(
                        " (`actiongate show {0}` shows the edit; `actiongate approve {0} --edited` approves it)",
                        args.id
                    ));
                    ClientError::Api(p)
                }
                other => other,
            })?;
        let exit = decided(&args.common, &action);
        if !args.common.json
            && let Some(expires) = &args.remember
        {
            println!(
                "remembered: granted for {} (see actiongate grants)",
                one_line(expires)
            );
        }
        Ok(exit)
    })
    .await
}

/// `deny ID [--reason R]`.
pub async fn deny(args: DenyArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let body = to_body(&DenyBody {
            reason: args.reason.clone(),
        })?;
        let action = api
            .post_decision(
                &format!("/v1/actions/{}/deny", path_segment(&args.id)),
                &body,
            )
            .await?;
        Ok(decided(&args.common, &action))
    })
    .await
}

/// `reply ID TEXT`.
pub async fn reply(args: ReplyArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let action = api
            .post_decision(
                &format!("/v1/actions/{}/reply", path_segment(&args.id)),
                &to_body(&ReplyBody {
                    text: args.text.clone(),
                })?,
            )
            .await?;
        Ok(decided(&args.common, &action))
    })
    .await
}

/// `grant …`.
pub async fn grant(args: GrantArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let mut body = Map::new();
        body.insert("expires".into(), json!(args.expires));
        for (k, v) in [
            ("handler", &args.handler),
            ("permission", &args.permission),
            ("tool", &args.tool),
            ("pattern", &args.pattern),
            ("agent", &args.agent),
            ("note", &args.note),
            ("idempotency_key", &args.idempotency_key),
        ] {
            if let Some(v) = v {
                body.insert(k.into(), json!(v));
            }
        }
        if args.handler.is_some() {
            body.insert(
                "scope".into(),
                Value::Object(scope_map(args.scope.clone())?),
            );
        }
        let (status, g) = api
            .call(
                reqwest::Method::POST,
                "/v1/grants",
                Some(&Value::Object(body)),
                Duration::ZERO,
            )
            .await?;
        if args.common.json {
            print_json(&g);
            return Ok(Exit::Ok);
        }
        if status == reqwest::StatusCode::OK {
            println!(
                "granted before under this idempotency key: {} ({})",
                s(&g, "id"),
                output::grant_target(&g)
            );
            return Ok(Exit::Ok);
        }
        let approved = g
            .get("approved_actions")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        println!(
            "granted {}: {} for {}, {}; approved {approved} pending action{}",
            s(&g, "id"),
            output::grant_target(&g),
            g.get("agent")
                .and_then(Value::as_str)
                .map_or("any agent".to_owned(), one_line),
            match g.get("expires_at").and_then(Value::as_str) {
                Some(_) => format!("until {}", output::when(&g, "expires_at")),
                None => "indefinitely".to_owned(),
            },
            if approved == 1 { "" } else { "s" }
        );
        Ok(Exit::Ok)
    })
    .await
}

/// Grants one page of `GET /v1/grants` holds.
const GRANTS_PAGE: usize = 500;

/// Most grants `grants` lists (the newest).
const MOST_GRANTS: usize = 10_000;

/// `grants [--all]`.
pub async fn grants(args: GrantsArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let mut q = vec![format!("limit={GRANTS_PAGE}")];
        if !args.all {
            q.push("active=true".to_owned());
        }
        if let Some(a) = &args.agent {
            q.push(format!("agent={}", query_value(a)));
        }
        let path = format!("/v1/grants?{}", q.join("&"));
        // Newest first, a page at a time, up to MOST_GRANTS.
        let list = Value::Array(api.after_pages(&path, GRANTS_PAGE, MOST_GRANTS).await?);
        if args.common.json {
            print_json(&list);
            return Ok(Exit::Ok);
        }
        let items = list.as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            println!("no {}grants", if args.all { "" } else { "active " });
            return Ok(Exit::Ok);
        }
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|g| {
                let state = if g.get("revoked_at").is_some_and(|r| !r.is_null()) {
                    "revoked"
                } else if g.get("active").and_then(Value::as_bool) == Some(true) {
                    "active"
                } else if g.get("uses_left").and_then(Value::as_i64) == Some(0) {
                    "used up"
                } else {
                    "expired"
                };
                vec![
                    s(g, "id").to_owned(),
                    g.get("agent")
                        .and_then(Value::as_str)
                        .map_or("*".to_owned(), |a| clip(a, 20)),
                    clip(&output::grant_target(g), 70),
                    match g.get("expires_at").and_then(Value::as_str) {
                        Some(_) => relative(g, "expires_at"),
                        None => "never".to_owned(),
                    },
                    state.to_owned(),
                    or_dash(g, "granted_by"),
                ]
            })
            .collect();
        print!(
            "{}",
            table(&["ID", "AGENT", "GRANT", "EXPIRES", "STATE", "BY"], &rows)
        );
        Ok(Exit::Ok)
    })
    .await
}

/// `revoke ID`.
pub async fn revoke(args: RevokeArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let g = api
            .delete(&format!("/v1/grants/{}", path_segment(&args.id)))
            .await?;
        if args.common.json {
            print_json(&g);
        } else {
            println!("revoked {}: {}", s(&g, "id"), output::grant_target(&g));
        }
        Ok(Exit::Ok)
    })
    .await
}

/// `request --tool T --detail D [--wait S]`: the exit code says how it stands.
pub async fn request(args: RequestArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let mut body = Map::new();
        body.insert("tool".into(), json!(args.tool));
        body.insert("detail".into(), json!(args.detail));
        for (k, v) in [
            ("reason", &args.reason),
            ("timeout", &args.timeout),
            ("idempotency_key", &args.idempotency_key),
            ("session", &args.session),
            ("runtime", &args.runtime),
        ] {
            if let Some(v) = v {
                body.insert(k.into(), json!(v));
            }
        }
        let (action, _) = api
            .create_action(&Value::Object(body), Duration::from_secs(args.wait))
            .await?;
        if args.common.json {
            print_json(&action);
        } else {
            println!("{}", output::action_line(&action));
        }
        Ok(exit_for_action(&action))
    })
    .await
}

/// `check --tool T --detail D`: 0 allow, 4 ask, 1 deny.
pub async fn check(args: CheckArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let mut body = json!({"tool": args.tool, "detail": args.detail});
        if let Some(path) = &args.profile {
            body["profile"] = super::profile::read_profile(path)?;
        }
        if let Some(session) = &args.session {
            body["session"] = json!(session);
        }
        let answer = api.post("/v1/check", &body).await?;
        let result = s(&answer, "result");
        if args.common.json {
            print_json(&answer);
        } else {
            println!(
                "{result}: {} — {}",
                clip(s(&answer, "action_string"), 200),
                clip(s(&answer, "reason"), 300)
            );
        }
        Ok(match result {
            "allow" => Exit::Ok,
            "ask" => Exit::Pending,
            "deny" => Exit::Denied,
            other => {
                return Err(ClientError::BadResponse(format!(
                    "the daemon answered an unknown decision '{}'",
                    one_line(other)
                )));
            }
        })
    })
    .await
}
