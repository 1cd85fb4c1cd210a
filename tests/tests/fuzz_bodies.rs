//! Property tests against the real binary: whatever JSON (or not-JSON) a
//! client sends to the API's write endpoints, deeply nested or not, with
//! field names the daemon knows or not, the answer is never a 5xx, every
//! error is problem+json, and the daemon stays ready; and free-form JSON
//! (params, scopes, results) of any shape is taken exactly when it keeps
//! to the limits (64 levels, its size), else refused with a 422 naming the
//! field. A short run here; `.ci/fuzz-bodies` runs many more cases
//! (`FUZZ_BODIES_CASES`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};

use crate::common;
use common::client;
use common::daemon::{Daemon, agent_key, role_key};

/// Field names the endpoints read, so generated bodies reach past "unknown
/// field" often.
const FIELDS: &[&str] = &[
    "tool",
    "detail",
    "handler",
    "action",
    "params",
    "reason",
    "timeout",
    "idempotency_key",
    "scope",
    "expires",
    "agent",
    "permission",
    "result",
    "status",
    "error",
    "pattern",
    "remember",
    "text",
    "role",
    "name",
    "profile",
    "url",
    "types",
    "id",
    "actions",
    "permissions",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        // Any character but NUL, which is refused wherever it is (a
        // test of its own: `fault_review`).
        "[^\\x00\\n]{0,24}".prop_map(Value::String),
        prop::sample::select(vec!["bash", "ls", "1h", "30m", "ask", "*", "fs", "deploy"])
            .prop_map(|s| Value::String(s.to_owned())),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `v` wrapped in `depth` arrays or objects.
fn nest(v: Value, depth: usize, arrays: bool) -> Value {
    (0..depth).fold(v, |acc, _| {
        if arrays {
            Value::Array(vec![acc])
        } else {
            json!({ "a": acc })
        }
    })
}

/// A body: an object of known and unknown fields, some values nested deep.
fn body() -> impl Strategy<Value = String> {
    let field = (
        prop_oneof![
            4 => prop::sample::select(FIELDS).prop_map(str::to_owned),
            1 => "[a-z_]{1,10}",
        ],
        value(),
        prop_oneof![4 => Just(0usize), 1 => 1usize..200],
        any::<bool>(),
    )
        .prop_map(|(k, v, depth, arrays)| (k, nest(v, depth, arrays)));
    prop_oneof![
        8 => prop::collection::vec(field, 0..6).prop_map(|fields| {
            let map: Map<String, Value> = fields.into_iter().collect();
            serde_json::to_string(&Value::Object(map)).unwrap()
        }),
        1 => value().prop_map(|v| serde_json::to_string(&v).unwrap()),
        1 => ".{0,64}",
    ]
}

/// Which endpoint, and with which key (0 agent, 1 operator, 2 admin).
const ENDPOINTS: &[(&str, usize)] = &[
    ("/v1/actions", 0),
    ("/v1/check", 0),
    ("/v1/permissions/check", 0),
    ("/v1/grant-requests", 0),
    ("/v1/actions/{id}/outcome", 0),
    ("/v1/actions/{id}/cancel", 0),
    ("/v1/actions/{id}/approve", 1),
    ("/v1/actions/{id}/deny", 1),
    ("/v1/actions/{id}/reply", 1),
    ("/v1/grants", 1),
    ("/v1/handlers", 2),
    ("/v1/keys", 2),
    ("/v1/subscriptions", 2),
];

#[test]
fn no_request_body_gets_a_5xx_or_a_non_problem_error() {
    let cases: u32 = std::env::var("FUZZ_BODIES_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let http = client();
    let admin = d.admin_key();
    let (agent, operator) = rt.block_on(async {
        (
            agent_key(&http, &d.base, &admin, "fuzz").await,
            role_key(&http, &d.base, &admin, "operator").await,
        )
    });
    let keys = [agent.clone(), operator, admin];
    // A pending action for the per-action endpoints.
    let pending = rt.block_on(async {
        let r = http
            .post(format!("{}/v1/actions", d.base))
            .bearer_auth(&agent)
            .json(&json!({"tool": "deploy", "detail": "fuzz target"}))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        v["id"].as_str().unwrap().to_owned()
    });

    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (0..ENDPOINTS.len(), body());
    let result = runner.run(&strategy, |(which, text)| {
        let (path, role) = ENDPOINTS[which];
        let url = format!("{}{}", d.base, path.replace("{id}", &pending));
        let (status, ctype) = rt.block_on(async {
            let r = http
                .post(&url)
                .bearer_auth(&keys[role])
                .header("content-type", "application/json")
                .body(text.clone())
                .send()
                .await
                .unwrap();
            let ctype = r
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            (r.status().as_u16(), ctype)
        });
        prop_assert!(status < 500, "{path}: {status} for {text}");
        if status >= 400 {
            prop_assert_eq!(
                ctype.as_str(),
                "application/problem+json",
                "{} for {}",
                path,
                text
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Still up and ready, and still answering reads.
    rt.block_on(async {
        let r = http.get(format!("{}/readyz", d.base)).send().await.unwrap();
        assert_eq!(r.status(), 200);
    });
    d.stop();
}

/// How deeply `v` nests (0 for a scalar).
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Property test of the JSON limits against the real binary: a handler
/// action's params, a grant request's scope and an outcome's result of any
/// shape, nested up to 130 levels or with a long string, are taken when
/// they nest at most 64 levels and keep to their size, and otherwise
/// refused with a 422 naming the field; whatever was taken, the audit
/// export still verifies.
#[test]
fn free_form_json_is_held_to_its_limits_whatever_its_shape() {
    let cases: u32 = std::env::var("FUZZ_BODIES_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(60, |n: u32| n / 4);
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "100000")],
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let http = client();
    let admin = d.admin_key();
    let (agent, operator, outcome_id) = rt.block_on(async {
        let agent = agent_key(&http, &d.base, &admin, "fuzz").await;
        let operator = role_key(&http, &d.base, &admin, "operator").await;
        common::daemon::register_handler(
            &http,
            &d.base,
            &admin,
            json!({"id": "files", "name": "Files", "url": "http://127.0.0.1:9/hook",
                "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object", "properties": {"path": {}}}}],
                "actions": [{"name": "write", "permission": "fs.write", "params_schema": {"type": "object"}}]}),
        )
        .await;
        let (_, a) = common::call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/actions", d.base),
            &agent,
            Some(json!({"tool": "deploy", "detail": "x"})),
        )
        .await;
        let id = a["id"].as_str().unwrap().to_owned();
        let (s, _) = common::call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/actions/{id}/approve", d.base),
            &operator,
            Some(json!({})),
        )
        .await;
        assert_eq!(s, 200);
        (agent, operator, id)
    });

    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let inner = prop_oneof![
        4 => (value(), 0usize..130, any::<bool>()).prop_map(|(v, d, arrays)| nest(v, d, arrays)),
        1 => (0usize..40_000).prop_map(|n| Value::String("x".repeat(n))),
    ];
    let result = runner.run(&(0usize..3, inner), |(which, v)| {
        // The field, its value's depth and size, the path and the body.
        let (field, levels, bytes, path, body) = match which {
            0 => {
                let params = json!({ "v": v });
                (
                    "params",
                    depth(&params),
                    params.to_string().len(),
                    "/v1/actions".to_owned(),
                    json!({"handler": "files", "action": "write", "params": params}),
                )
            }
            1 => {
                let scope = json!({ "path": v });
                (
                    "scope",
                    depth(&scope),
                    scope.to_string().len(),
                    "/v1/grant-requests".to_owned(),
                    json!({"handler": "files", "permission": "fs.write", "reason": "r", "scope": scope}),
                )
            }
            _ => (
                "result",
                depth(&v),
                v.to_string().len(),
                format!("/v1/actions/{outcome_id}/outcome"),
                json!({"status": "completed", "result": v}),
            ),
        };
        let max = match field {
            "scope" => 16 * 1024,
            _ => 256 * 1024,
        };
        let text = body.to_string();
        let (status, answer) = rt.block_on(async {
            let r = http
                .post(format!("{}{path}", d.base))
                .bearer_auth(&agent)
                .header("content-type", "application/json")
                .body(text.clone())
                .send()
                .await
                .unwrap();
            let s = r.status().as_u16();
            (s, r.json::<Value>().await.unwrap_or(Value::Null))
        });
        let refused_for_field = status == 422
            && answer["errors"]
                .as_array()
                .is_some_and(|e| e.iter().any(|x| x["field"] == field));
        if levels > 64 || bytes > max {
            prop_assert!(
                refused_for_field,
                "{field} of {levels} levels, {bytes} bytes: {status} {answer}"
            );
        } else {
            prop_assert!(
                !refused_for_field && status < 500,
                "{field} of {levels} levels, {bytes} bytes: {status} {answer}"
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let text = rt.block_on(crate::audit::export(&http, &d.base, &operator));
    let (ok, out) = crate::audit::verify(dir.path(), &text, &[]);
    assert!(ok, "{out}");
    d.stop();
}
