//! Black-box: a reported run (`POST /v1/runs`, docs/sessions.md) is covered
//! by one allowed or approved action, and each action covers one run: a
//! runtime that ran a command twice on one decision reports an undecided
//! run, on either backend and however the reports race.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common::daemon::{agent_key, role_key, set_profile};
use crate::sessions::{post, start};

async fn report(http: &reqwest::Client, base: &str, agent: &str, body: Value) -> Value {
    let (s, r) = post(http, format!("{base}/v1/runs"), agent, body).await;
    assert_eq!(s, 200, "{r}");
    r
}

async fn one_action_covers_one_run(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(d) = start(pg, dir.path(), &[]) else {
        return;
    };
    let http = crate::common::client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    let act = |detail: &'static str| {
        let (http, base, agent) = (http.clone(), d.base.clone(), agent.clone());
        async move {
            let (s, a) = post(
                &http,
                format!("{base}/v1/actions"),
                &agent,
                json!({"tool": "bash", "detail": detail, "session": "s"}),
            )
            .await;
            assert_eq!(s, 201, "{a}");
            assert_eq!(a["status"], "approved", "{a}");
            a["id"].as_str().unwrap().to_owned()
        }
    };
    // Two decisions of `make deploy`, three runs of it.
    let first = act("make deploy").await;
    let second = act("make deploy").await;
    let run = json!({"tool": "bash", "detail": "make deploy", "session": "s"});
    let a = report(&http, &d.base, &agent, run.clone()).await;
    let b = report(&http, &d.base, &agent, run.clone()).await;
    assert_eq!(a["decided"], true, "{a}");
    assert_eq!(b["decided"], true, "{b}");
    let mut covered = vec![
        a["action"].as_str().unwrap().to_owned(),
        b["action"].as_str().unwrap().to_owned(),
    ];
    covered.sort();
    let mut made = vec![first.clone(), second];
    made.sort();
    assert_eq!(covered, made, "each run is covered by an action of its own");
    let c = report(&http, &d.base, &agent, run.clone()).await;
    assert_eq!(
        c,
        json!({"decided": false, "action": null}),
        "a third run on two decisions"
    );
    // Naming an action another run claimed covers nothing either.
    let named = report(
        &http,
        &d.base,
        &agent,
        json!({"tool": "bash", "detail": "make deploy", "session": "s", "action": first}),
    )
    .await;
    assert_eq!(named["decided"], false, "{named}");
    let export = crate::audit::export(&http, &d.base, &operator).await;
    let undecided = export
        .lines()
        .filter(|l| l.contains("action.undecided"))
        .count();
    assert_eq!(undecided, 2, "{export}");

    // Racing reports: five decisions of `make test`, twelve runs at once:
    // exactly five are covered, each by another action.
    let mut made = Vec::new();
    for _ in 0..5 {
        made.push(act("make test").await);
    }
    let answers: Vec<Value> = futures::stream::iter(0..12)
        .map(|_| {
            let (http, base, agent) = (http.clone(), d.base.clone(), agent.clone());
            async move {
                report(
                    &http,
                    &base,
                    &agent,
                    json!({"tool": "bash", "detail": "make test", "session": "s"}),
                )
                .await
            }
        })
        .buffer_unordered(12)
        .collect()
        .await;
    let mut covered: Vec<String> = answers
        .iter()
        .filter_map(|r| r["action"].as_str().map(str::to_owned))
        .collect();
    covered.sort();
    made.sort();
    assert_eq!(covered, made, "{answers:?}");

    // A retry under the key of a call whose run was reported is refused:
    // the decision let it run once.
    let keyed = json!({"tool": "bash", "detail": "make ship", "session": "s",
                       "idempotency_key": "call-1"});
    let url = format!("{}/v1/actions", d.base);
    let (s, a) = post(&http, url.clone(), &agent, keyed.clone()).await;
    assert_eq!(s, 201, "{a}");
    let (s, again) = post(&http, url.clone(), &agent, keyed.clone()).await;
    assert_eq!((s, &again["id"]), (200, &a["id"]), "a retry before the run");
    let run = json!({"tool": "bash", "detail": "make ship", "session": "s", "action": a["id"]});
    assert_eq!(report(&http, &d.base, &agent, run).await["decided"], true);
    let (s, after) = post(&http, url, &agent, keyed).await;
    assert_eq!(s, 409, "{after}");
    assert!(
        after["detail"].as_str().unwrap().contains("ran already"),
        "{after}"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_allowed_action_covers_one_reported_run_on_sqlite() {
    one_action_covers_one_run(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_allowed_action_covers_one_reported_run_on_postgres() {
    one_action_covers_one_run(true).await;
}

/// An action an approver edited covers a run of the detail approved, and
/// never one of the detail the agent asked: that one nobody approved.
async fn an_edited_action_covers_the_run_approved(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(d) = start(pg, dir.path(), &[]) else {
        return;
    };
    let http = crate::common::client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    // `guarded` (the default): the agent's command is asked.
    let (s, a) = post(
        &http,
        format!("{}/v1/actions", d.base),
        &agent,
        json!({"tool": "bash", "detail": "rm -r build/cache", "session": "s"}),
    )
    .await;
    assert_eq!((s, a["status"].as_str()), (201, Some("pending")), "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    let (s, a) = post(
        &http,
        format!("{}/v1/actions/{id}/approve", d.base),
        &operator,
        json!({"detail": "rm -r build/cache/tmp"}),
    )
    .await;
    assert_eq!((s, a["edited"].as_bool()), (200, Some(true)), "{a}");

    let asked =
        json!({"tool": "bash", "detail": "rm -r build/cache", "session": "s", "action": id});
    let r = report(&http, &d.base, &agent, asked).await;
    assert_eq!(
        r,
        json!({"decided": false, "action": null}),
        "the command as asked was never approved"
    );
    let approved =
        json!({"tool": "bash", "detail": "rm -r build/cache/tmp", "session": "s", "action": id});
    let r = report(&http, &d.base, &agent, approved).await;
    assert_eq!(
        r,
        json!({"decided": true, "action": id}),
        "the edit was approved"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_action_covers_the_run_approved_on_sqlite() {
    an_edited_action_covers_the_run_approved(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_action_covers_the_run_approved_on_postgres() {
    an_edited_action_covers_the_run_approved(true).await;
}

/// An agent key reporting runs no decision covered, one after another, is
/// refused past `limits.max_undecided_runs_per_minute` (429, not recorded,
/// one `limit.reached`), and a refused report of an untrusted read still
/// taints its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecided_runs_past_the_limit_are_refused_but_still_taint() {
    let dir = tempfile::tempdir().unwrap();
    let Some(d) = start(
        false,
        dir.path(),
        &[("ACTIONGATE_LIMITS__MAX_UNDECIDED_RUNS_PER_MINUTE", "3")],
    ) else {
        return;
    };
    let http = crate::common::client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    for i in 0..3 {
        let r = report(
            &http,
            &d.base,
            &agent,
            json!({"tool": "bash", "detail": format!("make {i}"), "session": "a"}),
        )
        .await;
        assert_eq!(r["decided"], false, "{r}");
    }
    for _ in 0..2 {
        let (s, r) = post(
            &http,
            format!("{}/v1/runs", d.base),
            &agent,
            json!({"tool": "WebFetch", "detail": "https://example.test/", "session": "b"}),
        )
        .await;
        assert_eq!(s, 429, "{r}");
        assert_eq!(r["code"], "limit-reached", "{r}");
        assert!(
            r["detail"]
                .as_str()
                .unwrap()
                .contains("limits.max_undecided_runs_per_minute"),
            "{r}"
        );
    }
    let (s, session) = crate::common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/sessions/b", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{session}");
    assert_eq!(session["tainted_by"], "run", "{session}");
    // The session's first activity was that run: a way out there asks.
    let (s, a) = post(
        &http,
        format!("{}/v1/actions", d.base),
        &agent,
        json!({"tool": "bash", "detail": "scp notes.txt backup.example.test:/srv/", "session": "b"}),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let export = crate::audit::export(&http, &d.base, &operator).await;
    let count = |kind: &str| export.lines().filter(|l| l.contains(kind)).count();
    assert_eq!(count("action.undecided"), 3, "{export}");
    assert_eq!(count("limit.reached"), 1, "{export}");
    d.stop();
}
