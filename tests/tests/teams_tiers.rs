//! Black-box: subscriptions of escalation tier 2 (`docs/teams.md`) are sent
//! only `action.escalated`; tier 1, the default, every matching event.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::common::{call, client};
use crate::teams::{get, pending, profile};

async fn subscribe(http: &reqwest::Client, base: &str, admin: &str, body: Value) -> (u16, Value) {
    call(
        http,
        Method::POST,
        format!("{base}/v1/subscriptions"),
        admin,
        Some(body),
    )
    .await
}

/// The event types of a subscription's deliveries, oldest first.
async fn delivered(http: &reqwest::Client, base: &str, admin: &str, id: &str) -> Vec<String> {
    let (s, page) = call(
        http,
        Method::GET,
        format!("{base}/v1/subscriptions/{id}/deliveries"),
        admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{page}");
    let mut types: Vec<String> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["event_type"].as_str().unwrap().to_owned())
        .collect();
    types.reverse();
    types
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_two_subscription_is_sent_only_escalations() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let hook = "http://127.0.0.1:9/hook";
    for bad in [json!(0), json!(3), json!("2")] {
        let (s, p) = subscribe(
            &http,
            &d.base,
            &admin,
            json!({"url": hook, "types": ["*"], "tier": bad}),
        )
        .await;
        assert_eq!(s, 422, "{p}");
        assert!(p.to_string().contains("tier"), "{p}");
    }
    let (s, tier2) = subscribe(
        &http,
        &d.base,
        &admin,
        json!({"url": hook, "types": ["action.*"], "tier": 2}),
    )
    .await;
    assert_eq!(s, 201, "{tier2}");
    assert_eq!(tier2["tier"], 2, "{tier2}");
    let (s, tier1) = subscribe(
        &http,
        &d.base,
        &admin,
        json!({"url": hook, "types": ["action.*"]}),
    )
    .await;
    assert_eq!(s, 201, "{tier1}");
    assert_eq!(tier1["tier"], 1, "{tier1}");
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        profile(json!([{"pattern": "tool:deploy:.*", "escalate_after": "1s"}])),
    )
    .await;
    let id = pending(&http, &d.base, &agent, "deploy", "prod").await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while get(&http, &d.base, &admin, &id)
        .await
        .get("escalated_at")
        .is_none()
    {
        assert!(Instant::now() < deadline, "never escalated");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (t1, t2) = (tier1["id"].as_str().unwrap(), tier2["id"].as_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let all = delivered(&http, &d.base, &admin, t1).await;
        if all.iter().any(|t| t == "action.escalated") {
            assert_eq!(all, ["action.enqueued", "action.escalated"]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "tier 1 never sent the escalation: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        delivered(&http, &d.base, &admin, t2).await,
        ["action.escalated"]
    );
    let (s, listed) = call(
        &http,
        Method::GET,
        format!("{}/v1/subscriptions/{t2}", d.base),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{listed}");
    assert_eq!(listed["tier"], 2, "{listed}");
}

/// The escalation sweep reads every pending action, the longest waiting
/// first: a queue of newer items (here more than the 500 it reads at a
/// time) hides no older action that is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_due_for_escalation_is_escalated_behind_a_long_queue_of_newer_ones() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "1000")],
    );
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", profile(json!([]))).await;
    let old = pending(&http, &d.base, &agent, "deploy", "prod").await;
    futures::stream::iter(0..520)
        .map(|i| {
            let (http, base, agent) = (http.clone(), d.base.clone(), agent.clone());
            async move { pending(&http, &base, &agent, "build", &format!("job {i}")).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    // Only now does a rule say deploys escalate: the old one is due at once.
    set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        profile(json!([{"pattern": "tool:deploy:.*", "escalate_after": "1s"}])),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(&http, &d.base, &admin, &old)
        .await
        .get("escalated_at")
        .is_none()
    {
        assert!(
            Instant::now() < deadline,
            "the oldest action was never escalated"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
