//! Black-box tests: every action carries what the policy's analyser finds
//! it may do (`findings`: deletes, writes, network, …), in the answer to
//! the agent, in `GET /v1/actions/{id}` and in the list, from the command
//! itself (the page's risk badge is drawn from them). And the event
//! stream names its heartbeat period, so a client can tell a dead stream
//! from a quiet one under a non-default `events.heartbeat`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use reqwest::Method;
use serde_json::Value;

use crate::common;
use common::daemon::{Daemon, agent_key, request_action, role_key, status_json};
use common::{call, client};

fn names(v: &Value) -> Vec<&str> {
    v["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings: {v}"))
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_carry_the_analysers_findings() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "bash",
            "curl -X POST https://example.com/hook -d @report.json",
            &["network"],
        ),
        ("bash", "rm -rf ./build", &["deletes"]),
        ("bash", "echo done > notes.txt", &["writes"]),
        ("Write", "notes.txt", &["writes"]),
        (
            "bash",
            "git push --force origin main",
            &["deletes", "network"],
        ),
        ("bash", "ls -la", &[]),
    ];
    let mut ids = Vec::new();
    for (tool, detail, want) in cases {
        let (s, _, a) =
            status_json(request_action(&http, &d.base, &agent, tool, detail).await).await;
        assert!(s == 200 || s == 201, "{tool} {detail}: {s} {a}");
        assert_eq!(names(&a), *want, "{tool} {detail}: the agent's answer {a}");
        let id = a["id"].as_str().unwrap().to_owned();
        let got = call(
            &http,
            Method::GET,
            format!("{}/v1/actions/{id}", d.base),
            &operator,
            None,
        )
        .await
        .1;
        assert_eq!(names(&got), *want, "{tool} {detail}: GET {got}");
        // The raw detail an executor or agent needs is untouched.
        assert_eq!(got["detail"], *detail);
        ids.push((id, *want));
    }
    let list = call(
        &http,
        Method::GET,
        format!("{}/v1/actions?limit=50", d.base),
        &operator,
        None,
    )
    .await
    .1;
    for (id, want) in ids {
        let a = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} not listed: {list}"));
        assert_eq!(names(a), want, "the list: {a}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_names_its_heartbeat_period() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[("ACTIONGATE_EVENTS__HEARTBEAT", "7s")]);
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (s, _, a) = status_json(request_action(&http, &d.base, &agent, "bash", "ls").await).await;
    assert!(s == 200 || s == 201, "{a}");
    for path in [
        "/v1/events".to_owned(),
        format!("/v1/actions/{}/events", a["id"].as_str().unwrap()),
    ] {
        let resp = http
            .get(format!("{}{path}", d.base))
            .bearer_auth(&operator)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        assert_eq!(
            resp.headers()
                .get("actiongate-heartbeat-ms")
                .and_then(|v| v.to_str().ok()),
            Some("7000"),
            "{path}"
        );
    }
}
