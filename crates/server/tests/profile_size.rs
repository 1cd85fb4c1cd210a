//! Profiles are bounded in size, and compiling a large one holds up no
//! other request.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::TestApp;

/// How many patterns make [`slow_profile`] slow.
const SLOW_PATTERNS: usize = 400;

#[tokio::test]
async fn a_profile_over_the_bound_is_refused_naming_the_field_and_not_stored() {
    let app = TestApp::spawn().await;
    let admin = app.admin.clone();
    let many: Vec<String> = (0..=actiongate_policy::MAX_PATTERNS)
        .map(|i| format!("tool:t{i}:x"))
        .collect();
    let long = format!("tool:x:{}", "a".repeat(actiongate_policy::MAX_PATTERN_LEN));
    for (profile, field) in [
        (json!({"allow": many, "ask": []}), "profile.allow"),
        (
            json!({"allow": ["tool:y:.*"], "ask": ["tool:z:.*", long]}),
            "profile.ask[1]",
        ),
    ] {
        let (s, p) = app
            .call(
                Method::PUT,
                "/v1/agents/big",
                Some(&admin),
                Some(json!({ "profile": profile })),
            )
            .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
        assert_eq!(p["errors"][0]["field"], field, "{p}");
        let (s, _) = app
            .call(Method::GET, "/v1/agents/big", Some(&admin), None)
            .await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
    app.stop().await;
}

/// A profile within the bound that is slow to compile: look-arounds over
/// many words, each compiled by the backtracking engine. A few seconds of
/// compiling in a debug build: long enough that a runtime it held up would
/// miss the health check's bound, short enough to keep the suite quick.
fn slow_profile() -> Value {
    let words = (0..80)
        .map(|j| format!("w{j}"))
        .collect::<Vec<_>>()
        .join("|");
    let allow: Vec<String> = (1..SLOW_PATTERNS)
        .map(|i| format!("tool:t{i}:(?!{words}).*"))
        .collect();
    json!({"allow": allow, "ask": [".*"], "taints": [], "guarded": []})
}

#[tokio::test]
async fn healthz_answers_while_an_agents_profile_compiles() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", slow_profile()).await;
    // A restart empties the caches: the agent's next requests compile it.
    let app = TestApp::restart_with(app, |_| {}).await;
    let started = Instant::now();
    let requests = {
        let (a, b) = (app.request("bash", "ls"), app.request("bash", "pwd"));
        async move { tokio::join!(a, b) }
    };
    let health = async {
        // Let the requests reach the compile first.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (s, _) = app.call(Method::GET, "/healthz", None, None).await;
        assert_eq!(s, StatusCode::OK);
        // From the start: a runtime blocked by the compile would not even
        // wake this task from its sleep.
        started.elapsed()
    };
    let (((a, _), (b, _)), waited) = tokio::join!(requests, health);
    let compiling = started.elapsed();
    assert_eq!((a, b), (StatusCode::CREATED, StatusCode::CREATED));
    assert!(
        waited < Duration::from_secs(2),
        "/healthz took {waited:?} while the profile compiled ({compiling:?})"
    );
    app.stop().await;
}
