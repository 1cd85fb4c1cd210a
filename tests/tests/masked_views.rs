//! Black-box tests: secret-shaped text (the shapes shared with the page,
//! `crates/policy/tests/secret_shapes.json`) is masked in what the API
//! renders for humans: a handler action's `display` (title, summary,
//! labelled fields) and the policy's reason. What an executor, the agent
//! or an operator revealing it needs stays exact: `detail`,
//! `action_string` and `params`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use reqwest::Method;
use serde_json::{Value, json};

use crate::common;
use common::daemon::{Daemon, agent_key, role_key};
use common::{call, client};

fn shapes() -> Vec<(String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/policy/tests/secret_shapes.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `POST url` with `body`: the status and the JSON answer.
async fn post(http: &reqwest::Client, url: String, key: &str, body: Value) -> (u16, Value) {
    call(http, Method::POST, url, key, Some(body)).await
}

/// `GET url`'s JSON answer.
async fn get(http: &reqwest::Client, url: String, key: &str) -> Value {
    call(http, Method::GET, url, key, None).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_display_and_the_reason_mask_secrets_the_params_stay_exact() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let (s, h) = post(
        &http,
        format!("{}/v1/handlers", d.base),
        &admin,
        json!({
            "id": "runner", "name": "Runner", "url": "http://127.0.0.1:9/",
            "permissions": [{"name": "run.shell", "description": "run commands",
                "parameters_schema": {"type": "object", "properties": {"host": {"type": "string"}}}}],
            "actions": [{
                "name": "run", "description": "run a command", "permission": "run.shell",
                "scope": {"host": "/host"},
                "params_schema": {"type": "object",
                    "properties": {"host": {"type": "string"}, "cmd": {"type": "string"}},
                    "required": ["host", "cmd"]},
                "render": {"title": "On {host}: {cmd}", "summary": "runs {cmd}",
                    "fields": [{"label": "Command", "value": "{cmd}"}]}
            }]
        }),
    )
    .await;
    assert_eq!(s, 201, "{h}");
    for (input, want) in shapes() {
        let (s, a) = post(
            &http,
            format!("{}/v1/actions", d.base),
            &agent,
            json!({"handler": "runner", "action": "run", "params": {"host": "web1", "cmd": input}}),
        )
        .await;
        assert!(s == 200 || s == 201, "{input}: {s} {a}");
        let id = a["id"].as_str().unwrap();
        let got = get(&http, format!("{}/v1/actions/{id}", d.base), &operator).await;
        let listed = get(&http, format!("{}/v1/actions?limit=5", d.base), &operator).await;
        let listed = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == id)
            .unwrap()
            .clone();
        for (what, v) in [("answer", &a), ("GET", &got), ("list", &listed)] {
            let display = &v["display"];
            assert_eq!(display["title"], format!("On web1: {want}"), "{what}: {v}");
            assert_eq!(display["summary"], format!("runs {want}"), "{what}: {v}");
            assert_eq!(display["fields"][0]["value"], want.as_str(), "{what}: {v}");
            // The raw value, one deliberate click away, and what runs.
            assert_eq!(v["params"]["cmd"], input.as_str(), "{what}: {v}");
        }
    }

    // A shell command: the reason (which may quote the command) is masked,
    // the detail is exact.
    let (input, _) = &shapes()[0];
    let (s, a) = post(
        &http,
        format!("{}/v1/actions", d.base),
        &agent,
        json!({"tool": "bash", "detail": input}),
    )
    .await;
    assert!(s == 200 || s == 201, "{s} {a}");
    let secret = "4eC39HqLyjWDarjtT1zdp7dc";
    assert!(input.contains(secret));
    let got = get(
        &http,
        format!("{}/v1/actions/{}", d.base, a["id"].as_str().unwrap()),
        &operator,
    )
    .await;
    for v in [&a, &got] {
        assert!(
            !v["decision"]["reason"].as_str().unwrap().contains(secret),
            "{v}"
        );
        assert_eq!(v["detail"], input.as_str());
    }
}
