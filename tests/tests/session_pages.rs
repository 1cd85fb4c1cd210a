//! Black-box tests: `GET /v1/sessions` is read whole a page at a time
//! (`order`, `after`, `limit`), each session once even while sessions are
//! busy, filtered by `status` and `agent`; an agent key sees only its own;
//! bad parameters are 422 naming the parameter; on SQLite and Postgres.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{agent_key, role_key, set_profile};
use crate::common::{call, client};
use crate::sessions::{post, start};

/// `GET /v1/sessions` with `query`, percent-encoded.
fn url(base: &str, query: &[(&str, &str)]) -> reqwest::Url {
    reqwest::Url::parse_with_params(&format!("{base}/v1/sessions"), query).unwrap()
}

/// One page of `GET /v1/sessions` with `query`; its items.
async fn page(http: &reqwest::Client, base: &str, key: &str, query: &[(&str, &str)]) -> Vec<Value> {
    let resp = http
        .get(url(base, query))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 200, "{query:?}: {body}");
    body.as_array().expect("a bare JSON array").clone()
}

/// Every session `query` holds, `limit` at a time in `order`; `between`
/// runs after each page (to make sessions busy while paging).
async fn all_pages(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    query: &[(&str, &str)],
    order: &str,
    limit: usize,
    mut between: impl AsyncFnMut(),
) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    loop {
        let limit_s = limit.to_string();
        let mut q: Vec<(&str, &str)> = query.to_vec();
        q.push(("order", order));
        q.push(("limit", &limit_s));
        let last = ids.last().cloned();
        if let Some(last) = &last {
            q.push(("after", last));
        }
        let items = page(http, base, key, &q).await;
        assert!(items.len() <= limit, "{} > {limit}", items.len());
        ids.extend(items.iter().map(|s| s["id"].as_str().unwrap().to_owned()));
        if items.len() < limit {
            return ids;
        }
        between().await;
    }
}

/// The status and problem of a `GET /v1/sessions` that must be refused.
async fn refused(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    query: &[(&str, &str)],
) -> (u16, Value) {
    let resp = http
        .get(url(base, query))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(ctype, "application/problem+json", "{query:?}");
    (status, resp.json().await.unwrap())
}

fn fields(p: &Value) -> Vec<String> {
    p["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors in {p}"))
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect()
}

async fn sessions_are_paged_filtered_and_each_read_once(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(d) = start(pg, dir.path(), &[]) else {
        return;
    };
    let http = client();
    let admin = d.admin_key();
    let bot = agent_key(&http, &d.base, &admin, "bot").await;
    let other = agent_key(&http, &d.base, &admin, "other").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    for agent in ["bot", "other"] {
        set_profile(&http, &d.base, &admin, agent, json!("open")).await;
    }
    let act = async |key: &str, session: &str| {
        let (s, a) = post(
            &http,
            format!("{}/v1/actions", d.base),
            key,
            json!({"tool": "bash", "detail": "ls", "session": session}),
        )
        .await;
        assert_eq!(s, 201, "{a}");
    };
    // 203 sessions of bot (ids a runtime may choose: spaces, non-ASCII),
    // two of other; the first of bot's has two actions.
    let mut made: Vec<String> = Vec::new();
    for n in 0..203 {
        let id = match n {
            0 => "task one".to_owned(),
            1 => "tâche-2".to_owned(),
            _ => format!("s-{n:03}"),
        };
        act(&bot, &id).await;
        made.push(id);
        // Sessions begin in distinct milliseconds, so the order they began
        // is the order made (ties would be ordered by id).
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    act(&bot, "task one").await;
    act(&other, "o-1").await;
    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    act(&other, "o-2").await;
    let (s, ended) = post(
        &http,
        format!("{}/v1/sessions/s-005/end", d.base),
        &bot,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{ended}");

    // The default page holds 200, newest first by when they began.
    let first = page(&http, &d.base, &operator, &[]).await;
    assert_eq!(first.len(), 200);
    assert_eq!(first[0]["id"], "o-2");
    assert_eq!(first[1]["id"], "o-1");
    assert_eq!(first[2]["id"], "s-202");

    // Paged oldest first, 7 at a time, while an early session and the
    // last one read keep acting (which moves when they were last seen):
    // every session once, in the order they began.
    let mut busy = 0;
    let ids = all_pages(&http, &d.base, &operator, &[], "oldest", 7, async || {
        busy += 1;
        act(&bot, "task one").await;
        act(&bot, &made[(busy * 7).min(202)]).await;
    })
    .await;
    let mut want = made.clone();
    want.extend(["o-1".to_owned(), "o-2".to_owned()]);
    assert_eq!(ids, want);
    let newest = all_pages(&http, &d.base, &operator, &[], "newest", 50, async || {}).await;
    want.reverse();
    assert_eq!(newest, want);

    // Filters: by status, by agent; an agent key sees only its own.
    let ended: Vec<String> = page(&http, &d.base, &operator, &[("status", "ended")])
        .await
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ended, ["s-005"]);
    let active = page(
        &http,
        &d.base,
        &operator,
        &[("status", "active"), ("limit", "500")],
    )
    .await;
    assert_eq!(active.len(), 204);
    assert!(
        active
            .iter()
            .all(|s| s["status"] == "active" && s["id"] != "s-005")
    );
    let others = page(&http, &d.base, &operator, &[("agent", "other")]).await;
    assert_eq!(others.len(), 2);
    assert!(others.iter().all(|s| s["agent"] == "other"));
    let own = page(&http, &d.base, &other, &[]).await;
    assert_eq!(own.len(), 2, "an agent sees its own sessions only");
    assert!(
        page(&http, &d.base, &other, &[("agent", "bot")])
            .await
            .is_empty()
    );

    // Each session's actions are counted (for a whole page at once).
    let by_id: BTreeMap<String, Value> = page(&http, &d.base, &operator, &[("order", "oldest")])
        .await
        .into_iter()
        .map(|s| (s["id"].as_str().unwrap().to_owned(), s))
        .collect();
    let one = &by_id["task one"];
    assert!(one["actions"]["total"].as_i64().unwrap() >= 2, "{one}");
    assert_eq!(by_id["tâche-2"]["actions"]["total"], 1);
    assert_eq!(by_id["tâche-2"]["agent"], "bot");

    // Bad parameters: 422 naming them; a cursor naming no session the
    // caller may see: 404.
    for (q, field) in [
        (vec![("status", "open")], "status"),
        (vec![("limit", "0")], "limit"),
        (vec![("limit", "501")], "limit"),
        (vec![("agent", "not an agent!")], "agent"),
        (vec![("after", " padded")], "after"),
        (vec![("order", "sideways")], "order"),
    ] {
        let (s, p) = refused(&http, &d.base, &operator, &q).await;
        assert_eq!(s, 422, "{q:?}: {p}");
        assert_eq!(fields(&p), [field], "{q:?}: {p}");
    }
    // Another agent's session is no cursor for an agent: paging from it
    // would tell when it began.
    for (key, after, order) in [
        (&operator, "no-such-session", "newest"),
        (&other, "task one", "newest"),
        (&other, "task one", "oldest"),
    ] {
        let (s, p) = refused(&http, &d.base, key, &[("after", after), ("order", order)]).await;
        assert_eq!(s, 404, "{after} {order}: {p}");
    }
    let (s, _) = call(
        &http,
        Method::GET,
        format!("{}/v1/sessions", d.base),
        "nokey",
        None,
    )
    .await;
    assert_eq!(s, 401);
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_paged_filtered_and_each_read_once_on_sqlite() {
    sessions_are_paged_filtered_and_each_read_once(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_paged_filtered_and_each_read_once_on_postgres() {
    sessions_are_paged_filtered_and_each_read_once(true).await;
}
