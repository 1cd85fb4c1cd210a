//! Black-box tests: `GET /v1/sessions` is read whole a page at a time
//! (`order`, `after`, `limit`), each session once even while sessions are
//! busy, filtered by `status` and `agent`; an agent key sees only its own;
//! a full page links the next, placed so that it is found after the last
//! session was deleted; bad parameters are 422 naming the parameter; on
//! SQLite and Postgres.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key, set_profile};
use crate::common::pg_cluster::Cluster;
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

/// Deletes a session's row behind the daemon's back (as retention does).
type DeleteSession = Box<dyn Fn(&str)>;

/// A daemon on SQLite or Postgres, and how to delete its sessions.
fn daemon_deleting(pg: bool, dir: &std::path::Path) -> Option<(Daemon, DeleteSession)> {
    if pg {
        let cluster = Cluster::shared()?;
        let url = cluster.database();
        let d = Daemon::start(dir, &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())]);
        let delete = move |id: &str| {
            cluster
                .psql_at(&url, &format!("DELETE FROM sessions WHERE id = '{id}'"))
                .unwrap();
        };
        return Some((d, Box::new(delete)));
    }
    let d = Daemon::start(dir, &[]);
    let db = d.database();
    let delete = move |id: &str| {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        assert_eq!(
            conn.execute("DELETE FROM sessions WHERE id = ?1", [id])
                .unwrap(),
            1
        );
    };
    Some((d, Box::new(delete)))
}

async fn a_full_page_links_the_next_which_outlives_its_last_session(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some((d, delete)) = daemon_deleting(pg, dir.path()) else {
        return;
    };
    let http = client();
    let admin = d.admin_key();
    let bot = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    for n in 0..5 {
        let (s, a) = post(
            &http,
            format!("{}/v1/actions", d.base),
            &bot,
            json!({"tool": "bash", "detail": "ls", "session": format!("s-{n}")}),
        )
        .await;
        assert_eq!(s, 201, "{a}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let get = async |url: reqwest::Url| {
        let resp = http.get(url).bearer_auth(&operator).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let link = resp
            .headers()
            .get("link")
            .map(|l| l.to_str().unwrap().to_owned());
        let ids: Vec<String> = resp
            .json::<Vec<Value>>()
            .await
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect();
        (ids, link)
    };
    let (first, link) = get(url(&d.base, &[("limit", "2")])).await;
    assert_eq!(first, ["s-4", "s-3"]);
    let link = link.expect("a full page links the next");
    let next = link
        .strip_prefix('<')
        .and_then(|l| l.strip_suffix(">; rel=\"next\""))
        .unwrap_or_else(|| panic!("{link}"));
    // The session the page ended at goes (retention deleting it, say):
    // the link still finds the page after it; its id alone does not.
    delete("s-3");
    let (second, link) = get(reqwest::Url::parse(&format!("{}{next}", d.base)).unwrap()).await;
    assert_eq!(second, ["s-2", "s-1"], "{next}");
    assert!(link.is_some(), "a full page links the next");
    let (s, p) = refused(&http, &d.base, &operator, &[("after", "s-3")]).await;
    assert_eq!(s, 404, "{p}");
    // The last page is short and links nothing.
    let (last, link) = get(url(
        &d.base,
        &[
            ("limit", "2"),
            ("after", &second[1]),
            ("began", "2000-01-01T00:00:00Z"),
        ],
    ))
    .await;
    assert!(last.is_empty(), "{last:?}");
    assert_eq!(link, None);
    // `began` alone starts the list past every session that began then:
    // later ones oldest first, earlier ones newest first.
    let all = page(&http, &d.base, &operator, &[("order", "oldest")]).await;
    let began = |id: &str| {
        let s = all.iter().find(|s| s["id"] == id).unwrap();
        s["first_seen"].as_str().unwrap().to_owned()
    };
    let ids = |list: Vec<Value>| -> Vec<String> {
        list.iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let later = page(
        &http,
        &d.base,
        &operator,
        &[("order", "oldest"), ("began", &began("s-1"))],
    )
    .await;
    assert_eq!(ids(later), ["s-2", "s-4"]);
    let earlier = page(&http, &d.base, &operator, &[("began", &began("s-2"))]).await;
    assert_eq!(ids(earlier), ["s-1", "s-0"]);
    // It is a time.
    let (s, p) = refused(&http, &d.base, &operator, &[("began", "today")]).await;
    assert_eq!((s, fields(&p)), (422, vec!["began".to_owned()]), "{p}");
    let (s, p) = refused(
        &http,
        &d.base,
        &operator,
        &[("after", "s-1"), ("began", "yesterday")],
    )
    .await;
    assert_eq!((s, fields(&p)), (422, vec!["began".to_owned()]), "{p}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_page_links_the_next_which_outlives_its_last_session_on_sqlite() {
    a_full_page_links_the_next_which_outlives_its_last_session(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_page_links_the_next_which_outlives_its_last_session_on_postgres() {
    a_full_page_links_the_next_which_outlives_its_last_session(true).await;
}
