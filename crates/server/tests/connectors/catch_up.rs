//! Catching up at start: every pending action reaches the chat, the
//! longest waiting included, however many newer ones wait with it.

use serde_json::json;

use super::common::TestApp;
use super::fake::Fake;
use super::pending;

#[tokio::test]
async fn a_daemon_started_on_a_long_queue_posts_its_longest_waiting_action() {
    let telegram = Fake::start().await;
    let app = TestApp::spawn_with(|s| s.limits.max_pending_per_agent = 1000).await;
    app.profile("agent-1", json!("standard")).await;
    // Asked while no chat was set up: the oldest, then 250 newer.
    let oldest = pending(&app, "make deploy-oldest").await;
    for i in 0..250 {
        pending(&app, &format!("make job-{i}")).await;
    }
    let tg = telegram.base.clone();
    let app = app
        .restart_with(move |s| {
            s.limits.max_pending_per_agent = 1000;
            let t = &mut s.connectors.telegram;
            t.token = "123:TOKEN".into();
            t.chat_id = "-1001".into();
            t.api_base = tg;
            t.poll_seconds = 1;
        })
        .await;
    telegram
        .wait_for("/sendMessage", "the oldest action's message", |c| {
            c.iter().any(|c| c.body.to_string().contains(&oldest))
        })
        .await;
    app.stop().await;
}
