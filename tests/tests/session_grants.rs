//! Black-box tests of grants limited to a session or a count of uses
//! (issue 33, docs/sessions.md): grant requests may ask for them; a plan
//! step of several commands takes one use; a line needing a counted grant
//! always spends it; counted allows still count against the pending limit.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, Keyed, agent_key, register_handler};
use crate::common::{call, client};
use crate::sessions::post;

async fn setup(env: &[(&str, &str)]) -> (tempfile::TempDir, Daemon, String, String) {
    let k = Keyed::start(env).await;
    (k.dir, k.d, k.agent, k.operator)
}

async fn status(base: &str, agent: &str, body: Value) -> String {
    let (s, a) = post(&client(), format!("{base}/v1/actions"), agent, body).await;
    assert_eq!(s, 201, "{a}");
    a["status"].as_str().unwrap().to_owned()
}

/// A handler `files` with one action `write` scoped by its `path`.
fn files_handler() -> Value {
    json!({
        "id": "files", "name": "Files", "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object", "properties": {"path": {}}}}],
        "actions": [{"name": "write", "permission": "fs.write", "scope": {"path": "/path"},
            "params_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
    })
}

fn shell(detail: &str, session: &str) -> Value {
    json!({"tool": "bash", "detail": detail, "session": session})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_request_may_ask_for_a_session_and_uses_and_its_grant_has_them() {
    let (_dir, d, agent, operator) = setup(&[]).await;
    let http = client();
    register_handler(&http, &d.base, &d.admin_key(), files_handler()).await;
    let url = format!("{}/v1/grant-requests", d.base);
    let ask = |extra: Value| {
        let mut body = json!({"handler": "files", "permission": "fs.write",
            "scope": {"path": "/a"}, "reason": "to write /a"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for (bad, field) in [
        (json!({"uses": 0}), "uses"),
        (json!({"uses": 10001}), "uses"),
        (json!({"session": " padded"}), "session"),
    ] {
        let (s, p) = post(&http, url.clone(), &agent, ask(bad)).await;
        assert_eq!(s, 422, "{p}");
        assert!(p.to_string().contains(field), "{p}");
    }
    // Another agent's session cannot be named.
    let other = agent_key(&http, &d.base, &d.admin_key(), "other").await;
    assert_eq!(
        status(
            &d.base,
            &other,
            json!({"tool": "x", "detail": "y", "session": "theirs"})
        )
        .await,
        "pending"
    );
    let (s, p) = post(
        &http,
        url.clone(),
        &agent,
        ask(json!({"session": "theirs"})),
    )
    .await;
    assert_eq!(s, 422, "{p}");

    let (s, r) = post(
        &http,
        url.clone(),
        &agent,
        ask(json!({"session": "task", "uses": 2})),
    )
    .await;
    assert_eq!(s, 201, "{r}");
    assert_eq!(r["session"], "task", "{r}");
    assert_eq!(r["uses"], 2, "{r}");
    let id = r["id"].as_str().unwrap();
    let (s, done) = post(
        &http,
        format!("{}/v1/grant-requests/{id}/approve", d.base),
        &operator,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(done["grant"]["session"], "task", "{done}");
    assert_eq!(done["grant"]["uses"], 2, "{done}");
    let write = |session: &str| json!({"handler": "files", "action": "write", "params": {"path": "/a"}, "session": session});
    // Another session gets nothing of it; this one, exactly two.
    assert_eq!(status(&d.base, &agent, write("elsewhere")).await, "pending");
    for _ in 0..2 {
        assert_ne!(status(&d.base, &agent, write("task")).await, "pending");
    }
    assert_eq!(status(&d.base, &agent, write("task")).await, "pending");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_step_of_several_commands_takes_one_use() {
    let (_dir, d, agent, operator) = setup(&[]).await;
    let http = client();
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans", d.base),
        &agent,
        json!({"session": "p", "steps": [{"tool": "bash", "detail": "cd app && make build"}]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let id = plan["id"].as_str().unwrap();
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans/{id}/approve", d.base),
        &operator,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{plan}");
    assert_eq!(
        plan["steps"][0]["grants"].as_array().unwrap().len(),
        1,
        "{plan}"
    );
    assert_eq!(
        status(&d.base, &agent, shell("cd app && make build", "p")).await,
        "approved"
    );
    // Spent: neither the step again nor one of its commands runs unasked.
    assert_eq!(
        status(&d.base, &agent, shell("cd app && make build", "p")).await,
        "pending"
    );
    assert_eq!(
        status(&d.base, &agent, shell("make build", "p")).await,
        "pending"
    );
    assert_eq!(
        status(&d.base, &agent, shell("cd app", "p")).await,
        "pending"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_needs_a_counted_grant_spends_it_even_beside_a_standing_one() {
    let (_dir, d, agent, operator) = setup(&[]).await;
    let http = client();
    let grant = |pattern: &str, scoped: Value| {
        let mut body = json!({"agent": "bot", "tool": "bash", "pattern": pattern, "expires": "1h"});
        body.as_object_mut()
            .unwrap()
            .extend(scoped.as_object().unwrap().clone());
        body
    };
    for body in [
        grant("cd app", json!({})),
        grant("make test", json!({"session": "g", "uses": 1})),
        grant("make lint", json!({"session": "g", "uses": 1})),
    ] {
        let (s, g) = post(&http, format!("{}/v1/grants", d.base), &operator, body).await;
        assert_eq!(s, 201, "{g}");
    }
    // Two counted grants would be needed for one action: asked. So is one
    // counted grant for several commands: a use is one command.
    assert_eq!(
        status(&d.base, &agent, shell("make test && make lint", "g")).await,
        "pending"
    );
    assert_eq!(
        status(&d.base, &agent, shell("make lint; make lint", "g")).await,
        "pending"
    );
    assert_eq!(
        status(&d.base, &agent, shell("cd app && make lint && cd app", "g")).await,
        "approved",
        "the standing grant's commands take no use"
    );
    assert_eq!(
        status(&d.base, &agent, shell("make lint", "g")).await,
        "pending",
        "that one use is spent"
    );
    let (s, g) = post(
        &http,
        format!("{}/v1/grants", d.base),
        &operator,
        grant("make lint", json!({"session": "g", "uses": 1})),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    assert_eq!(
        status(&d.base, &agent, shell("cd app && make test", "g")).await,
        "approved"
    );
    assert_eq!(
        status(&d.base, &agent, shell("cd app && make test", "g")).await,
        "pending"
    );
    assert_eq!(
        status(&d.base, &agent, shell("cd app", "g")).await,
        "approved"
    );
    assert_eq!(
        status(&d.base, &agent, shell("make lint", "g")).await,
        "approved"
    );
    assert_eq!(
        status(&d.base, &agent, shell("make lint", "g")).await,
        "pending"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allows_racing_for_the_last_use_do_not_pass_the_pending_limit() {
    let (_dir, d, agent, operator) =
        setup(&[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "3")]).await;
    let http = client();
    let (s, g) = post(
        &http,
        format!("{}/v1/grants", d.base),
        &operator,
        json!({"agent": "bot", "tool": "deploy", "pattern": "x", "expires": "1h",
               "session": "race", "uses": 1}),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    let mut racing = Vec::new();
    for _ in 0..20 {
        let (http, base, agent) = (http.clone(), d.base.clone(), agent.clone());
        racing.push(tokio::spawn(async move {
            let (s, a) = post(
                &http,
                format!("{base}/v1/actions"),
                &agent,
                json!({"tool": "deploy", "detail": "x", "session": "race"}),
            )
            .await;
            (s, a["status"].as_str().unwrap_or_default().to_owned())
        }));
    }
    let mut approved = 0;
    let mut pending = 0;
    for t in racing {
        match t.await.unwrap() {
            (201, s) if s == "approved" => approved += 1,
            (201, s) if s == "pending" => pending += 1,
            (429, _) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(approved, 1);
    assert!(pending <= 3, "{pending} pending past a limit of 3");
    let (s, page) = call(
        &http,
        Method::GET,
        format!("{}/v1/actions?status=pending&agent=bot", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{page}");
    assert!(page["items"].as_array().unwrap().len() <= 3, "{page}");
    d.stop();
}

/// A counted grant whose uses are spent is not listed as active, in the
/// API or the CLI (`actiongate grants` says "used up" with `--all`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_counted_grant_is_listed_as_used_up_not_active() {
    let (_dir, d, agent, operator) = setup(&[]).await;
    let http = client();
    let (s, g) = post(
        &http,
        format!("{}/v1/grants", d.base),
        &operator,
        json!({"agent": "bot", "tool": "bash", "pattern": "make ship", "expires": "1h",
               "session": "u", "uses": 1}),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    let id = g["id"].as_str().unwrap().to_owned();
    let listed = |active: bool| {
        let (http, base, operator) = (http.clone(), d.base.clone(), operator.clone());
        async move {
            let url = format!("{base}/v1/grants?active={active}");
            let (s, l) = call(&http, Method::GET, url, &operator, None).await;
            assert_eq!(s, 200, "{l}");
            l.as_array()
                .unwrap()
                .iter()
                .map(|g| g["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(true).await, vec![id.clone()]);
    assert_eq!(
        status(&d.base, &agent, shell("make ship", "u")).await,
        "approved"
    );
    assert!(listed(true).await.is_empty());
    assert_eq!(listed(false).await, vec![id.clone()]);
    let out = std::process::Command::new(crate::common::binary("actiongate"))
        .args(["grants", "--all", "--url", &d.base, "--key", &operator])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.lines()
            .any(|l| l.contains(&id) && l.contains("used up")),
        "{text}"
    );
    d.stop();
}

/// A grant for a session that has ended would be revoked when the session
/// opens again: made directly, by a grant request's approval or by
/// approve-and-remember, it is refused (409) and nothing is stored,
/// instead of answering `active: true` and vanishing (race review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_for_an_ended_session_is_refused_not_silently_voided() {
    let (_dir, d, agent, operator) = setup(&[]).await;
    let http = client();
    register_handler(&http, &d.base, &d.admin_key(), files_handler()).await;
    // The session is used (a pending action and a grant request in it),
    // then ended.
    let (s, pending) = post(
        &http,
        format!("{}/v1/actions", d.base),
        &agent,
        shell("make ship", "done"),
    )
    .await;
    assert_eq!(s, 201, "{pending}");
    let (s, req) = post(
        &http,
        format!("{}/v1/grant-requests", d.base),
        &agent,
        json!({"handler": "files", "permission": "fs.write", "scope": {"path": "/a"},
            "reason": "r", "session": "done", "uses": 3}),
    )
    .await;
    assert_eq!(s, 201, "{req}");
    let (s, e) = post(
        &http,
        format!("{}/v1/sessions/done/end", d.base),
        &agent,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{e}");

    let (s, p) = post(
        &http,
        format!("{}/v1/grants", d.base),
        &operator,
        json!({"tool": "bash", "pattern": "make.*", "session": "done", "expires": "1h"}),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("has ended"), "{p}");
    let (s, p) = post(
        &http,
        format!(
            "{}/v1/grant-requests/{}/approve",
            d.base,
            req["id"].as_str().unwrap()
        ),
        &operator,
        json!({}),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    let (s, p) = post(
        &http,
        format!(
            "{}/v1/actions/{}/approve",
            d.base,
            pending["id"].as_str().unwrap()
        ),
        &operator,
        json!({"remember": {"expires": "1h", "session": "done"}}),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    let (s, grants) = call(
        &http,
        Method::GET,
        format!("{}/v1/grants", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{grants}");
    assert_eq!(grants.as_array().map(Vec::len), Some(0), "{grants}");
    // The action itself is still the operator's to approve.
    let (s, a) = post(
        &http,
        format!(
            "{}/v1/actions/{}/approve",
            d.base,
            pending["id"].as_str().unwrap()
        ),
        &operator,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    d.stop();
}

/// A use is one command run: a counted grant allows no line that may run
/// its command more than once as written (a loop, a function), and a
/// handler action's command line is counted command by command, as a
/// shell tool's is (one use of `make deploy-*` let `touch one; touch two;
/// touch three` run on a handler).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counted_grant_allows_no_loop_and_counts_a_handler_s_commands() {
    let (_dir, d, agent, operator) = setup(&[]).await;
    let (agent, operator) = (&agent, &operator);
    let http = client();
    let (s, g) = post(
        &http,
        format!("{}/v1/grants", d.base),
        operator,
        json!({"agent": "bot", "tool": "bash", "pattern": "make deploy-.*",
               "session": "c", "uses": 3, "expires": "1h"}),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    for line in [
        "for i in 1 2 3 4 5; do make deploy-a; done",
        "while true; do make deploy-a; done",
        "until false; do make deploy-a; done",
        "f() { make deploy-a; }; f; f; f; f",
    ] {
        assert_eq!(
            status(&d.base, agent, shell(line, "c")).await,
            "pending",
            "{line}"
        );
    }
    assert_eq!(
        status(&d.base, agent, shell("make deploy-a", "c")).await,
        "approved",
        "the grant allows its command, once a use"
    );

    register_handler(
        &http,
        &d.base,
        &d.admin_key(),
        json!({
            "id": "sh1", "name": "Shell", "url": "http://127.0.0.1:9/hook",
            "permissions": [{"name": "shell.exec", "parameters_schema": {"type": "object",
                "properties": {"command": {"type": "string"}}}}],
            "actions": [{"name": "run", "permission": "shell.exec",
                "params_schema": {"type": "object", "properties": {"content": {"type": "string"}}},
                "scope": {"command": "/content"}, "detail": "run {content}"}]
        }),
    )
    .await;
    let (s, g) = post(
        &http,
        format!("{}/v1/grants", d.base),
        operator,
        json!({"agent": "bot", "handler": "sh1", "permission": "shell.exec",
               "scope": {"command": "touch *"}, "session": "c", "uses": 1, "expires": "1h"}),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    let run = |content: &str| {
        json!({"handler": "sh1", "action": "run", "params": {"content": content},
               "session": "c"})
    };
    for line in [
        "touch one; touch two; touch three",
        "touch one && touch two",
        "for f in a b c; do touch $f; done",
    ] {
        assert_eq!(status(&d.base, agent, run(line)).await, "pending", "{line}");
    }
    assert_ne!(status(&d.base, agent, run("touch one")).await, "pending");
    assert_eq!(
        status(&d.base, agent, run("touch two")).await,
        "pending",
        "its one use is spent"
    );
    d.stop();
}
