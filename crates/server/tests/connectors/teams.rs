//! Approvals for teams (`docs/teams.md`) through Slack's interactivity
//! entry against the fake Web API: a quorum of two approvers, and a click
//! from someone the connector lets approve but the approvals rule does not.

use reqwest::Method;
use serde_json::{Value, json};

use super::common::TestApp;
use super::fake::Fake;
use super::slack::{SECRET, click, post, signed};
use super::{action, pending, wait_status};

pub(super) async fn person(app: &TestApp, name: &str, slack: &str) {
    let admin = app.admin.clone();
    let (status, p) = app
        .call(
            Method::POST,
            "/v1/people",
            Some(&admin),
            Some(json!({"name": name, "chat": {"slack": slack}})),
        )
        .await;
    assert!(status.is_success(), "{p}");
}

pub(super) async fn tap(app: &TestApp, user: &str, id: &str, ts: &str) {
    let now = chrono::Utc::now().timestamp();
    let body = click(user, &format!("a:{id}"), ts);
    assert_eq!(
        post(app, &body, now, &signed(SECRET, now, &body)).await,
        200
    );
}

/// The ephemeral notices Slack was asked to show `user`.
pub(super) fn notices_to(calls: &[super::fake::Call], user: &str) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.body["user"] == user)
        .map(|c| c.body["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_slack_click_counts_toward_a_quorum_and_an_outsider_is_refused_and_told_why() {
    let fake = Fake::start().await;
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |s| {
        let c = &mut s.connectors.slack;
        c.token = "xoxb-test".into();
        c.channel = "C1".into();
        c.signing_secret = SECRET.into();
        // The connector lets all three decide; the approvals rule, two.
        c.approvers = vec!["U1".into(), "U2".into(), "U3".into()];
        c.api_base = format!("{base}/api");
    })
    .await;
    app.profile(
        "agent-1",
        json!({"allow": [], "ask": ["(?s).*"], "approvals": [
            {"pattern": "tool:bash:make deploy.*", "count": 2, "approvers": ["ann", "bea"]}
        ]}),
    )
    .await;
    person(&app, "ann", "U1").await;
    person(&app, "bea", "U2").await;
    person(&app, "carl", "U3").await;
    let id = pending(&app, "make deploy").await;
    let posted = fake
        .wait_for("/chat.postMessage", "the message", |c| {
            c.iter().any(|c| c.body.to_string().contains(&id))
        })
        .await;
    // The card says what it needs before anyone approved.
    let card = posted
        .iter()
        .find(|c| c.body.to_string().contains(&id))
        .unwrap()
        .body
        .to_string();
    assert!(
        card.contains("Needs 2 approvals from distinct people"),
        "{card}"
    );

    // carl is outside the rule: nothing changes, and he is told why.
    tap(&app, "U3", &id, "1.1").await;
    let notices = fake
        .wait_for("/chat.postEphemeral", "carl's notice", |c| {
            !notices_to(c, "U3").is_empty()
        })
        .await;
    let told = notices_to(&notices, "U3").join(" ");
    assert!(told.contains("not an approver"), "{told}");
    assert!(told.contains("approvals rule #0"), "{told}");
    let a = action(&app, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert!(a.get("approvals").is_none_or(Value::is_null), "{a}");

    // ann's click is one of two; the same click again does not count twice.
    tap(&app, "U1", &id, "1.2").await;
    let mut a = action(&app, &id).await;
    for _ in 0..100 {
        if a["approvals"].as_array().is_some_and(|l| !l.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        a = action(&app, &id).await;
    }
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals"][0]["who"], "ann", "{a}");
    assert_eq!(a["approvals"][0]["channel"], "slack", "{a}");
    assert_eq!(a["approvals_required"], 2, "{a}");
    tap(&app, "U1", &id, "1.3").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let a = action(&app, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals"].as_array().unwrap().len(), 1, "{a}");

    // bea's completes it.
    tap(&app, "U2", &id, "1.4").await;
    let a = wait_status(&app, &id, "approved").await;
    assert_eq!(a["decided_person"], "bea", "{a}");
    assert_eq!(a["decided_channel"], "slack", "{a}");
    let who: Vec<&str> = a["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["who"].as_str().unwrap())
        .collect();
    assert_eq!(who, ["ann", "bea"]);
    app.stop().await;
}

/// The Slack updates of the message whose text starts with `head`: the
/// text and button ids of each `chat.update` of it, in order.
fn updates_of(calls: &[super::fake::Call], head: &str) -> Vec<(String, Vec<String>)> {
    calls
        .iter()
        .filter(|c| {
            c.body["text"]
                .as_str()
                .is_some_and(|t| super::plain(t).starts_with(head))
        })
        .map(|c| {
            let text = super::plain(c.body["text"].as_str().unwrap_or_default());
            let buttons = c.body["blocks"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
                .filter_map(|e| e["action_id"].as_str().map(str::to_owned))
                .collect();
            (text, buttons)
        })
        .collect()
}

/// While a quorum collects, the chat's card shows who approved so far and
/// keeps its buttons; once someone edited the action, it shows the edit
/// and loses Approve (a chat approval is of the action as asked); the
/// outcome edit comes last.
#[tokio::test]
async fn a_chat_card_shows_approvals_so_far_and_an_edit_takes_its_approve_away() {
    const FIRST: &str = "tool:bash:make deploy\n";
    const SECOND: &str = "tool:bash:make deploy eu\n";
    let fake = Fake::start().await;
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |s| {
        let c = &mut s.connectors.slack;
        c.token = "xoxb-test".into();
        c.channel = "C1".into();
        c.signing_secret = SECRET.into();
        c.approvers = vec!["U1".into(), "U2".into()];
        c.api_base = format!("{base}/api");
    })
    .await;
    app.profile(
        "agent-1",
        json!({"allow": [], "ask": ["(?s).*"], "approvals": [
            {"pattern": "tool:bash:make deploy.*", "count": 2}
        ]}),
    )
    .await;
    person(&app, "ann", "U1").await;
    person(&app, "bea", "U2").await;
    let id = pending(&app, "make deploy").await;
    fake.wait_for("/chat.postMessage", "the message", |c| {
        c.iter().any(|c| c.body.to_string().contains(&id))
    })
    .await;

    tap(&app, "U1", &id, "2.1").await;
    let calls = fake
        .wait_for("/chat.update", "the progress update", |c| {
            updates_of(c, FIRST)
                .iter()
                .any(|(t, _)| t.contains("Approved so far: 1 of 2: ann (slack)"))
        })
        .await;
    let (_, buttons) = updates_of(&calls, FIRST).pop().unwrap();
    assert!(buttons.contains(&format!("a:{id}")), "{buttons:?}");
    tap(&app, "U2", &id, "2.2").await;
    wait_status(&app, &id, "approved").await;
    let calls = fake
        .wait_for("/chat.update", "the outcome edit", |c| {
            updates_of(c, FIRST)
                .last()
                .is_some_and(|(t, _)| t.contains("Approved by bea (slack)"))
        })
        .await;
    let (text, buttons) = updates_of(&calls, FIRST).pop().unwrap();
    assert!(buttons.is_empty(), "{text} {buttons:?}");
    // Nothing updates it after its outcome.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let after = updates_of(&fake.calls_to("/chat.update"), FIRST);
    assert!(after.last().unwrap().0.contains("Approved by"), "{after:?}");

    // An operator edits another with the first approval.
    let other = pending(&app, "make deploy eu").await;
    fake.wait_for("/chat.postMessage", "the message", |c| {
        c.iter().any(|c| c.body.to_string().contains(&other))
    })
    .await;
    let op = app.person_operator("ops").await;
    let (s, a) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{other}/approve"),
            Some(&op),
            Some(json!({"detail": "make deploy eu --dry-run"})),
        )
        .await;
    assert!(s.is_success(), "{a}");
    let calls = fake
        .wait_for("/chat.update", "the edit shown", |c| {
            updates_of(c, SECOND)
                .iter()
                .any(|(t, _)| t.contains("make deploy eu --dry-run"))
        })
        .await;
    let (text, buttons) = updates_of(&calls, SECOND).pop().unwrap();
    assert!(text.contains("Edited by"), "{text}");
    assert_eq!(buttons, [format!("d:{other}")], "{text}");
    app.stop().await;
}

/// An escalated action is told to the people of its rule's `escalate_to`
/// group in every chat they have (Telegram's private chat, Slack's and
/// Discord's direct messages), without buttons; to nobody else; and to a
/// chat of tier 2 only once escalated.
#[tokio::test]
async fn an_escalation_is_told_to_its_group_in_every_chat_they_have() {
    let fake = Fake::start().await;
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |s| {
        let t = &mut s.connectors.telegram;
        t.token = "123:TOKEN".into();
        t.chat_id = "-1001".into();
        t.approvers = vec!["42".into()];
        t.api_base = base.clone();
        t.poll_seconds = 1;
        let c = &mut s.connectors.slack;
        c.token = "xoxb-test".into();
        c.channel = "C1".into();
        c.signing_secret = SECRET.into();
        c.approvers = vec!["U1".into()];
        c.api_base = format!("{base}/api");
        c.tier = 2;
        let d = &mut s.connectors.discord;
        d.token = "bot-token".into();
        d.channel_id = "C9".into();
        d.approvers = vec!["1".into()];
        d.public_key = hex::encode(super::discord::key().verifying_key().to_bytes());
        d.api_base = format!("{base}/api/v10");
        d.mode = actiongate_server::config::DiscordMode::Http;
    })
    .await;
    app.profile(
        "agent-1",
        json!({"allow": [], "ask": ["(?s).*"], "approvals": [
            {"pattern": "tool:bash:make deploy.*", "escalate_after": "1s", "escalate_to": "oncall"}
        ]}),
    )
    .await;
    let admin = app.admin.clone();
    for (name, groups, n) in [
        ("oscar", json!(["oncall"]), "77"),
        ("nora", json!([]), "88"),
    ] {
        let (status, p) = app
            .call(
                Method::POST,
                "/v1/people",
                Some(&admin),
                Some(json!({"name": name, "groups": groups, "chat": {
                    "telegram": n, "slack": format!("U{n}"), "discord": format!("9{n}")}})),
            )
            .await;
        assert!(status.is_success(), "{p}");
    }
    let id = pending(&app, "make deploy").await;
    // Tier 1 (Telegram's group) is told at once; Slack (tier 2) is not.
    fake.wait_for("/sendMessage", "the group chat's message", |c| {
        c.iter()
            .any(|c| c.body["chat_id"] == "-1001" && c.body.to_string().contains(&id))
    })
    .await;
    assert!(fake.calls_to("/chat.postMessage").is_empty());
    let esc = wait_escalated(&app, &id).await;
    assert_eq!(esc["status"], "pending", "{esc}");
    let tg = fake
        .wait_for("/sendMessage", "oscar's private message", |c| {
            c.iter().any(|c| c.body["chat_id"] == "77")
        })
        .await;
    let to_oscar = tg.iter().find(|c| c.body["chat_id"] == "77").unwrap();
    assert!(
        to_oscar.body.to_string().contains("make deploy"),
        "{:?}",
        to_oscar.body
    );
    assert!(
        to_oscar.body.get("reply_markup").is_none(),
        "{:?}",
        to_oscar.body
    );
    let slack = fake
        .wait_for(
            "/chat.postMessage",
            "oscar's DM and the tier-2 channel",
            |c| {
                c.iter().any(|c| c.body["channel"] == "U77")
                    && c.iter().any(|c| c.body["channel"] == "C1")
            },
        )
        .await;
    let dm = fake
        .wait_for("/users/@me/channels", "oscar's Discord DM", |c| {
            c.iter().any(|c| c.body["recipient_id"] == "977")
        })
        .await;
    let dm_channel = format!(
        "/channels/dm{}/messages",
        dm.iter()
            .find(|c| c.body["recipient_id"] == "977")
            .unwrap()
            .answered
    );
    fake.wait_for(&dm_channel, "the message in oscar's Discord DM", |c| {
        !c.is_empty()
    })
    .await;
    // nora is in no escalation group: told nowhere.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !fake
            .calls_to("/sendMessage")
            .iter()
            .any(|c| c.body["chat_id"] == "88")
    );
    assert!(!slack.iter().any(|c| c.body["channel"] == "U88"));
    assert!(
        !fake
            .calls_to("/users/@me/channels")
            .iter()
            .any(|c| c.body["recipient_id"] == "988")
    );
    app.stop().await;
}

async fn wait_escalated(app: &TestApp, id: &str) -> Value {
    for _ in 0..400 {
        let a = action(app, id).await;
        if a.get("escalated_at").is_some_and(|v| !v.is_null()) {
            return a;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("never escalated: {}", action(app, id).await);
}

/// Approver globs match people's and keys' names, never the identity a
/// decision came through: `s*`, meant for people named s…, does not let
/// carl approve because his click arrives as `slack:U3`, nor an identity
/// that is nobody's (both once approved).
#[tokio::test]
async fn an_approver_glob_does_not_match_the_chat_identity() {
    let fake = Fake::start().await;
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |s| {
        let c = &mut s.connectors.slack;
        c.token = "xoxb-test".into();
        c.channel = "C1".into();
        c.signing_secret = SECRET.into();
        c.approvers = vec!["U1".into(), "U3".into(), "U4".into()];
        c.api_base = format!("{base}/api");
    })
    .await;
    app.profile(
        "agent-1",
        json!({"allow": [], "ask": ["(?s).*"], "approvals": [
            {"pattern": "tool:bash:make pay.*", "count": 1, "approvers": ["s*"]}
        ]}),
    )
    .await;
    person(&app, "sam", "U1").await;
    person(&app, "carl", "U3").await;
    let id = pending(&app, "make pay").await;
    fake.wait_for("/chat.postMessage", "the message", |c| {
        c.iter().any(|c| c.body.to_string().contains(&id))
    })
    .await;
    for (user, ts) in [("U3", "3.1"), ("U4", "3.2")] {
        tap(&app, user, &id, ts).await;
        fake.wait_for("/chat.postEphemeral", "the refusal", |c| {
            !notices_to(c, user).is_empty()
        })
        .await;
        let a = action(&app, &id).await;
        assert_eq!(a["status"], "pending", "{user}: {a}");
    }
    tap(&app, "U1", &id, "3.3").await;
    let a = wait_status(&app, &id, "approved").await;
    assert_eq!(a["decided_person"], "sam", "{a}");
    app.stop().await;
}
