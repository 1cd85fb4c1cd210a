//! From an adversarial review of deciding in chat (`docs/teams.md`,
//! `docs/connectors.md`) as a chat account: a card shows the action as the
//! agent asked it, so its Approve approves only that, never a version an
//! approver elsewhere edited after the card was posted. And a chat account
//! the connector lets approve but that is nobody's could be a second account
//! of someone who approved already: it does not count toward a quorum.

use reqwest::Method;
use serde_json::json;

use super::common::TestApp;
use super::fake::Fake;
use super::slack::SECRET;
use super::teams::{notices_to, person, tap};
use super::{action, pending};

/// A daemon whose Slack connector (against a fake Web API) lets `approver`
/// decide, and whose agent's `make` commands need two approvals.
async fn slack_quorum(approver: &str) -> (Fake, TestApp) {
    let fake = Fake::start().await;
    let base = fake.base.clone();
    let approver = approver.to_owned();
    let app = TestApp::spawn_with(move |s| {
        let c = &mut s.connectors.slack;
        c.token = "xoxb-test".into();
        c.channel = "C1".into();
        c.signing_secret = SECRET.into();
        c.approvers = vec![approver];
        c.api_base = format!("{base}/api");
    })
    .await;
    app.profile(
        "agent-1",
        json!({"allow": [], "ask": ["(?s).*"], "approvals": [
            {"pattern": "tool:bash:make .*", "count": 2}
        ]}),
    )
    .await;
    (fake, app)
}

/// Ann edits `make deploy` into `make publish` with the first of two
/// approvals (on the page, through the API); Bea then taps Approve on the
/// Slack card, which still reads `make deploy`. Her tap must not complete
/// the quorum on `make publish`, which she never saw: nothing changes,
/// and she is told to decide where the edit is shown.
#[tokio::test]
async fn a_chat_approval_of_the_card_as_asked_does_not_approve_a_later_edit() {
    let (fake, app) = slack_quorum("U2").await;
    person(&app, "bea", "U2").await;
    let id = pending(&app, "make deploy").await;
    fake.wait_for("/chat.postMessage", "the card", |c| {
        c.iter().any(|c| c.body.to_string().contains(&id))
    })
    .await;

    let op = app.person_operator("ops").await;
    let (status, a) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&op),
            Some(json!({"detail": "make publish"})),
        )
        .await;
    assert!(status.is_success(), "{a}");
    assert_eq!(a["status"], "pending", "{a}");

    tap(&app, "U2", &id, "1.1").await;
    let notices = fake
        .wait_for("/chat.postEphemeral", "bea's notice", |c| {
            !notices_to(c, "U2").is_empty()
        })
        .await;
    let told = notices_to(&notices, "U2").join(" ");
    assert!(told.contains("edited"), "{told}");
    let a = action(&app, &id).await;
    assert_eq!(
        a["status"], "pending",
        "a stale card approved the edit: {a}"
    );
    assert_eq!(a["approvals"].as_array().map(Vec::len), Some(1), "{a}");
    app.stop().await;
}

/// Ann (a person) approves the first of two on the page; U3, on the Slack
/// connector's approvers but nobody's, taps Approve: not a second person
/// for all the daemon knows, so nothing changes and U3 is told why. A deny
/// from U3 still ends it (a denial fails safe).
#[tokio::test]
async fn a_chat_account_that_is_nobodys_does_not_complete_a_quorum() {
    let (fake, app) = slack_quorum("U3").await;
    let id = pending(&app, "make deploy").await;
    fake.wait_for("/chat.postMessage", "the card", |c| {
        c.iter().any(|c| c.body.to_string().contains(&id))
    })
    .await;
    let ann = app.person_operator("ann").await;
    let (status, a) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&ann),
            Some(json!({})),
        )
        .await;
    assert!(status.is_success(), "{a}");

    tap(&app, "U3", &id, "1.1").await;
    let notices = fake
        .wait_for("/chat.postEphemeral", "the notice", |c| {
            !notices_to(c, "U3").is_empty()
        })
        .await;
    let told = notices_to(&notices, "U3").join(" ");
    assert!(told.contains("belongs to no person"), "{told}");
    let a = action(&app, &id).await;
    assert_eq!(a["status"], "pending", "one person's quorum: {a}");
    assert_eq!(a["approvals"].as_array().map(Vec::len), Some(1), "{a}");

    let now = chrono::Utc::now().timestamp();
    let body = super::slack::click("U3", &format!("d:{id}"), "1.2");
    assert_eq!(
        super::slack::post(&app, &body, now, &super::slack::signed(SECRET, now, &body)).await,
        200
    );
    super::wait_status(&app, &id, "denied").await;
    app.stop().await;
}
