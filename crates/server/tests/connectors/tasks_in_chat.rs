//! Sessions and plans in chat (Telegram against its fake): "Approve for
//! task" on a card of an action that belongs to a session makes a grant
//! for that session only; a plan is posted as one card that approves all
//! its steps; a run nobody decided is told.

use reqwest::Method;
use serde_json::{Value, json};

use super::common::TestApp;
use super::fake::Fake;
use super::telegram::{APPROVER, sent, spawn, tap};

/// Requests `detail` in `session` as the agent; the answer.
async fn in_session(app: &TestApp, detail: &str, session: &str) -> Value {
    let agent = app.agent.clone();
    let (status, a) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&agent),
            Some(json!({"tool": "bash", "detail": detail, "session": session})),
        )
        .await;
    assert!(status.is_success(), "{a}");
    a
}

fn buttons(body: &Value) -> Vec<String> {
    body["reply_markup"]["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .map(|b| b["callback_data"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn approve_for_task_grants_within_the_session_only() {
    let fake = Fake::start().await;
    let app = spawn(&fake, |_| {}).await;
    let a = in_session(&app, "make deploy", "task-7").await;
    assert_eq!(a["status"], "pending", "{a}");
    let id = a["id"].as_str().unwrap();
    let (body, _) = sent(&fake, id).await;
    assert!(
        super::plain(body["text"].as_str().unwrap()).contains("Session: task-7"),
        "{body}"
    );
    assert_eq!(
        buttons(&body),
        [
            format!("a:{id}"),
            format!("r:{id}"),
            format!("t:{id}"),
            format!("d:{id}")
        ]
    );
    fake.push_update(tap(1, "cq-task", APPROVER, &format!("t:{id}")));
    super::wait_status(&app, id, "approved").await;

    // The same command in the same session is allowed; in another, asked.
    let again = in_session(&app, "make deploy", "task-7").await;
    assert_eq!(again["status"], "approved", "{again}");
    let other = in_session(&app, "make deploy", "task-8").await;
    assert_eq!(other["status"], "pending", "{other}");
    let op = app.operator.clone();
    let (_, grants) = app.call(Method::GET, "/v1/grants", Some(&op), None).await;
    let made: Vec<&Value> = grants
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["session"] == "task-7")
        .collect();
    assert_eq!(made.len(), 1, "{grants}");

    // An action with no session has no such button.
    let plain = super::pending(&app, "make release").await;
    let (body, _) = sent(&fake, &plain).await;
    assert!(!buttons(&body).contains(&format!("t:{plain}")), "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_plan_is_one_card_whose_approve_approves_every_step() {
    let fake = Fake::start().await;
    let app = spawn(&fake, |_| {}).await;
    let agent = app.agent.clone();
    let (status, plan) = app
        .call(
            Method::POST,
            "/v1/plans",
            Some(&agent),
            Some(json!({"session": "task-9", "reason": "ship the fix",
                "steps": [{"tool": "bash", "detail": "make test"},
                          {"tool": "bash", "detail": "git push origin fix"}]})),
        )
        .await;
    assert_eq!(status.as_u16(), 201, "{plan}");
    let pid = plan["id"].as_str().unwrap();
    let (body, message) = sent(&fake, pid).await;
    let text = &super::plain(body["text"].as_str().unwrap());
    assert!(text.contains("Plan of 2 steps"), "{text}");
    assert!(text.contains("1. tool:bash:make test"), "{text}");
    assert!(text.contains("2. tool:bash:git push origin fix"), "{text}");
    assert_eq!(
        buttons(&body),
        [format!("a:pl:{pid}"), format!("d:pl:{pid}")]
    );

    // A stranger's tap decides nothing.
    fake.push_update(tap(1, "cq-stranger", 7, &format!("a:pl:{pid}")));
    fake.push_update(tap(2, "cq-plan", APPROVER, &format!("a:pl:{pid}")));
    let op = app.operator.clone();
    let mut decided = Value::Null;
    for _ in 0..200 {
        let (_, p) = app
            .call(Method::GET, &format!("/v1/plans/{pid}"), Some(&op), None)
            .await;
        if p["status"] != "pending" {
            decided = p;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(decided["status"], "approved", "{decided}");
    assert_eq!(decided["decided_by"], format!("telegram:{APPROVER}"));
    fake.wait_for("/editMessageText", "the plan's card edited", |c| {
        c.iter().any(|c| {
            c.body["message_id"] == message
                && c.body["text"]
                    .as_str()
                    .unwrap_or("")
                    .contains("Approved by telegram:42")
        })
    })
    .await;
    // Its steps run once each in its session.
    let step = in_session(&app, "git push origin fix", "task-9").await;
    assert_eq!(step["status"], "approved", "{step}");
    let twice = in_session(&app, "git push origin fix", "task-9").await;
    assert_eq!(twice["status"], "pending", "{twice}");
    app.stop().await;
}

#[tokio::test]
async fn a_run_nobody_decided_is_told_in_chat() {
    let fake = Fake::start().await;
    let app = spawn(&fake, |_| {}).await;
    let agent = app.agent.clone();
    let (status, r) = app
        .call(
            Method::POST,
            "/v1/runs",
            Some(&agent),
            Some(json!({"tool": "bash", "detail": "rm -rf build", "session": "task-3"})),
        )
        .await;
    assert!(status.is_success(), "{r}");
    assert_eq!(r["decided"], false, "{r}");
    let calls = fake
        .wait_for("/sendMessage", "the undecided run's message", |c| {
            c.iter().any(|c| {
                super::plain(c.body["text"].as_str().unwrap_or(""))
                    .contains("Ran without a decision: tool:bash:rm -rf build")
            })
        })
        .await;
    let told = calls
        .iter()
        .find(|c| {
            c.body["text"]
                .as_str()
                .unwrap_or("")
                .contains("Ran without")
        })
        .unwrap();
    assert!(buttons(&told.body).is_empty(), "{:?}", told.body);
    // More runs of the session update that message, not one more each.
    for detail in ["rm -rf dist", "rm -rf out"] {
        let (status, r) = app
            .call(
                Method::POST,
                "/v1/runs",
                Some(&agent),
                Some(json!({"tool": "bash", "detail": detail, "session": "task-3"})),
            )
            .await;
        assert!(status.is_success(), "{r}");
    }
    let message = json!(told.answered);
    fake.wait_for("/editMessageText", "the message updated", |c| {
        c.iter().any(|c| {
            c.body["message_id"] == message
                && super::plain(c.body["text"].as_str().unwrap_or(""))
                    .contains("3 runs without a decision, the latest: tool:bash:rm -rf out")
        })
    })
    .await;
    let sent = fake
        .calls_to("/sendMessage")
        .iter()
        .filter(|c| {
            c.body["text"]
                .as_str()
                .unwrap_or("")
                .contains("without a decision")
        })
        .count();
    assert_eq!(sent, 1, "one message per session");
    // The two runs sent at once made one edit, not one each.
    let edits = fake
        .calls_to("/editMessageText")
        .iter()
        .filter(|c| c.body["message_id"] == message)
        .count();
    assert_eq!(edits, 1, "an edit per run");
    app.stop().await;
}
