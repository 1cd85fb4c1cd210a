//! Black-box tests: a queue of grant requests or plans longer than one
//! listing is read whole, the longest waiting first, with
//! `?order=oldest&after=<last id>&limit=N`; the answers stay bare arrays,
//! and bad paging parameters are 422 problem+json naming the parameter.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common;
use common::daemon::{Daemon, agent_key, files_handler, register_handler, role_key};
use common::{call, client};

/// `GET` of a listing that must answer a bare array; its items.
async fn list(http: &reqwest::Client, url: String, key: &str) -> Vec<Value> {
    let (s, body) = call(http, Method::GET, url, key, None).await;
    assert_eq!(s, 200, "{body}");
    body.as_array().expect("a bare JSON array").clone()
}

/// Every item of `path` (with its query, without paging), read oldest
/// first `limit` at a time until a page is short.
async fn oldest_first(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    key: &str,
    limit: usize,
) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    loop {
        let mut url = format!("{base}{path}&order=oldest&limit={limit}");
        if let Some(last) = ids.last() {
            url.push_str(&format!("&after={last}"));
        }
        let page = list(http, url, key).await;
        assert!(page.len() <= limit, "{} > {limit}", page.len());
        ids.extend(page.iter().map(|x| x["id"].as_str().unwrap().to_owned()));
        if page.len() < limit {
            return ids;
        }
    }
}

/// The problem of a `GET` that must be refused with 422; the fields named.
async fn refused(http: &reqwest::Client, url: String, key: &str) -> Vec<String> {
    let resp = http.get(url).bearer_auth(key).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(ctype, "application/problem+json");
    let p: Value = resp.json().await.unwrap();
    p["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors in {p}"))
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect()
}

/// A pending grant request of the agent whose key is `agent`; its id.
async fn ask(http: &reqwest::Client, base: &str, agent: &str, n: usize) -> String {
    let (s, r) = call(
        http,
        Method::POST,
        format!("{base}/v1/grant-requests"),
        agent,
        Some(json!({"handler": "files", "permission": "fs.write", "reason": format!("r{n}")})),
    )
    .await;
    assert_eq!(s, 201, "{r}");
    r["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_longer_than_a_listing_is_paged_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "1000")],
    );
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    register_handler(&http, &d.base, &admin, files_handler()).await;
    let mut agents = Vec::new();
    for name in ["a1", "a2", "a3"] {
        agents.push(agent_key(&http, &d.base, &admin, name).await);
    }
    // The longest waiting first, then 509 more from three agents at once.
    let first = ask(&http, &d.base, &agents[0], 0).await;
    let mut tasks = Vec::new();
    for (i, agent) in agents.iter().enumerate() {
        let (http, base, agent) = (http.clone(), d.base.clone(), agent.clone());
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in 0..170 - usize::from(i == 0) {
                ids.push(ask(&http, &base, &agent, n).await);
            }
            ids
        }));
    }
    let mut made = vec![first.clone()];
    for t in tasks {
        made.extend(t.await.unwrap());
    }
    assert_eq!(made.len(), 510);

    // Unpaged, the listing is the newest 500 as before: the oldest is not
    // among them.
    let newest = list(
        &http,
        format!("{}/v1/grant-requests?status=pending", d.base),
        &operator,
    )
    .await;
    assert_eq!(newest.len(), 500);
    assert!(newest.iter().all(|r| r["id"] != first.as_str()));
    // Oldest first, a page at a time: every one once, in id order.
    let paged = oldest_first(
        &http,
        &d.base,
        "/v1/grant-requests?status=pending",
        &operator,
        120,
    )
    .await;
    assert_eq!(paged[0], first);
    let mut sorted = made.clone();
    sorted.sort();
    assert_eq!(paged, sorted);
    assert_eq!(paged.iter().collect::<HashSet<_>>().len(), 510);
    let whole = oldest_first(
        &http,
        &d.base,
        "/v1/grant-requests?status=pending",
        &operator,
        500,
    )
    .await;
    assert_eq!(whole, sorted);
    // An agent pages through its own only.
    let own = oldest_first(
        &http,
        &d.base,
        "/v1/grant-requests?status=pending",
        &agents[1],
        50,
    )
    .await;
    assert_eq!(own.len(), 170);
    assert!(own.is_sorted());
    // Newest first after a cursor: what is older than it.
    let after = &sorted[300];
    let older = list(
        &http,
        format!(
            "{}/v1/grant-requests?status=pending&after={after}&limit=500",
            d.base
        ),
        &operator,
    )
    .await;
    let mut want: Vec<&String> = sorted[..300].iter().collect();
    want.reverse();
    assert_eq!(
        older
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        want.iter().map(|s| s.as_str()).collect::<Vec<_>>()
    );
    // A cursor naming no request (mistyped), or one the agent may not see,
    // is refused: read as a position it would start the list again.
    let theirs = &own[0];
    for (after, key) in [("nope", &operator), (theirs.as_str(), &agents[0])] {
        let (s, b) = call(
            &http,
            Method::GET,
            format!("{}/v1/grant-requests?after={after}", d.base),
            key,
            None,
        )
        .await;
        assert_eq!(s, 404, "{after}: {b}");
        assert!(
            b["detail"].as_str().unwrap().contains("page on from"),
            "{b}"
        );
    }

    // Plans: 210 of two agents (past the default page of 200).
    let mut plans = Vec::new();
    for n in 0..210 {
        let (s, p) = call(
            &http,
            Method::POST,
            format!("{}/v1/plans", d.base),
            &agents[n % 2],
            Some(
                json!({"session": format!("s{}", n % 2), "steps": [{"tool": "bash", "detail": format!("make {n}")}]}),
            ),
        )
        .await;
        assert_eq!(s, 201, "{p}");
        plans.push(p["id"].as_str().unwrap().to_owned());
    }
    let unpaged = list(
        &http,
        format!("{}/v1/plans?status=pending", d.base),
        &operator,
    )
    .await;
    assert_eq!(unpaged.len(), 200);
    assert!(unpaged.iter().all(|p| p["id"] != plans[0].as_str()));
    let paged = oldest_first(&http, &d.base, "/v1/plans?status=pending", &operator, 64).await;
    assert_eq!(paged, plans);

    // Bad paging: 422 naming the parameter.
    for (path, field) in [
        ("/v1/grant-requests?limit=0", "limit"),
        ("/v1/grant-requests?limit=501", "limit"),
        ("/v1/grant-requests?limit=many", "limit"),
        ("/v1/grant-requests?order=sideways", "order"),
        ("/v1/plans?limit=0", "limit"),
        ("/v1/plans?limit=501", "limit"),
        ("/v1/plans?order=sideways", "order"),
    ] {
        let fields = refused(&http, format!("{}{path}", d.base), &operator).await;
        assert_eq!(fields, [field], "{path}");
    }
    // A cursor naming no plan (and so no place in the order): 404.
    let (s, p) = call(
        &http,
        Method::GET,
        format!("{}/v1/plans?order=oldest&after=pln_nothing", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 404, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("pln_nothing"), "{p}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_past_one_page_are_listed_whole_by_the_api_and_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let mut tasks = Vec::new();
    for w in 0..4 {
        let (http, base, key) = (http.clone(), d.base.clone(), operator.clone());
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in 0..130 {
                let (s, g) = call(
                    &http,
                    Method::POST,
                    format!("{base}/v1/grants"),
                    &key,
                    Some(json!({"agent": "coder", "tool": "bash",
                        "pattern": format!("echo {w}-{n}"), "expires": "1h"})),
                )
                .await;
                assert_eq!(s, 201, "{g}");
                ids.push(g["id"].as_str().unwrap().to_owned());
            }
            ids
        }));
    }
    let mut made = Vec::new();
    for t in tasks {
        made.extend(t.await.unwrap());
    }
    made.sort();
    assert_eq!(made.len(), 520);
    // Unpaged: the newest 500.
    let newest = list(
        &http,
        format!("{}/v1/grants?active=true", d.base),
        &operator,
    )
    .await;
    assert_eq!(newest.len(), 500);
    assert!(newest.iter().all(|g| g["id"] != made[0].as_str()));
    // Oldest first, a page at a time: every one once, in id order.
    let paged = oldest_first(&http, &d.base, "/v1/grants?active=true", &operator, 77).await;
    assert_eq!(paged, made);
    // The CLI reads every page.
    let out = std::process::Command::new(crate::common::binary("actiongate"))
        .args(["grants", "--json", "--url", &d.base, "--key", &operator])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut ids: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, made);
    for (path, field) in [
        ("/v1/grants?limit=0", "limit"),
        ("/v1/grants?limit=501", "limit"),
        ("/v1/grants?order=sideways", "order"),
    ] {
        let fields = refused(&http, format!("{}{path}", d.base), &operator).await;
        assert_eq!(fields, [field], "{path}");
    }
    d.stop();
}
