//! Handlers, grants and grant requests over real HTTP and SQLite. Dispatch
//! is paused here so that approved handler actions stay `approved`; the
//! dispatch tests cover what happens next.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::time::Duration;

use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn mail_handler() -> Value {
    json!({
        "id": "mail",
        "name": "Mailer",
        "description": "Sends email",
        "url": "http://127.0.0.1:9/hook",
        "permissions": [{
            "name": "email.send",
            "description": "Send email to a recipient",
            "parameters_schema": {"type": "object", "properties": {"recipient": {"type": "string"}}}
        }],
        "actions": [{
            "name": "send",
            "description": "Send one email",
            "params_schema": {
                "type": "object",
                "properties": {
                    "to": {"type": "string", "format": "email"},
                    "subject": {"type": "string", "maxLength": 200},
                    "body": {"type": "string"},
                    "api_token": {"type": "string"}
                },
                "required": ["to", "subject"],
                "additionalProperties": false
            },
            "permission": "email.send",
            "scope": {"recipient": "/to"},
            "detail": "send to {to}",
            "render": {"title": "Email to {to}", "summary": "{subject}", "fields": [{"label": "Token", "value": "{api_token}"}]},
            "sensitive": ["/api_token"]
        }]
    })
}

async fn register(app: &TestApp) -> String {
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(mail_handler()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    body["secret"].as_str().unwrap().to_owned()
}

async fn send(app: &TestApp, key: &str, to: &str) -> Value {
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(key),
            Some(json!({
                "handler": "mail", "action": "send",
                "params": {"to": to, "subject": "hi", "api_token": "tok-SECRET-123"}
            })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    body
}

async fn grant(app: &TestApp, body: Value) -> Value {
    let (s, g) = app
        .call(Method::POST, "/v1/grants", Some(&app.operator), Some(body))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    g
}

#[tokio::test]
async fn registration_returns_the_secret_once_and_validates_everything() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    let secret = register(&app).await;
    assert!(secret.starts_with("whsec_"));
    let (_, shown) = app
        .call(Method::GET, "/v1/handlers/mail", Some(&app.admin), None)
        .await;
    assert_eq!(shown["id"], "mail");
    assert!(!shown.to_string().contains(&secret));
    let (_, list) = app
        .call(Method::GET, "/v1/handlers", Some(&app.admin), None)
        .await;
    assert!(!list.to_string().contains(&secret));
    let (s, _) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(mail_handler()),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);

    type Mutation = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Mutation)> = vec![
        (
            "actions[0].params_schema",
            Box::new(|h: &mut Value| h["actions"][0]["params_schema"] = json!({"type": "nope"})),
        ),
        (
            "permissions[0].parameters_schema",
            Box::new(|h: &mut Value| {
                h["permissions"][0]["parameters_schema"] = json!({"minLength": "x"})
            }),
        ),
        (
            "actions[0].permission",
            Box::new(|h: &mut Value| h["actions"][0]["permission"] = json!("email.read")),
        ),
        (
            "actions[0].scope.domain",
            Box::new(|h: &mut Value| h["actions"][0]["scope"] = json!({"domain": "/to"})),
        ),
        (
            "actions[0].scope.recipient",
            Box::new(|h: &mut Value| h["actions"][0]["scope"] = json!({"recipient": "/cc"})),
        ),
        (
            "actions[0].detail",
            Box::new(|h: &mut Value| h["actions"][0]["detail"] = json!("send to {cc}")),
        ),
        (
            "actions[0].detail",
            Box::new(|h: &mut Value| h["actions"][0]["detail"] = json!("token {api_token}")),
        ),
        (
            "actions[0].render.title",
            Box::new(|h: &mut Value| h["actions"][0]["render"]["title"] = json!("{")),
        ),
        ("url", Box::new(|h: &mut Value| h["url"] = json!("ftp://x"))),
        ("id", Box::new(|h: &mut Value| h["id"] = json!("Bad Id"))),
        // A timeout no lease can be dated by (it once stopped dispatch
        // for every handler), one past a day, and one that is no duration.
        (
            "timeout",
            Box::new(|h: &mut Value| h["timeout"] = json!("99999999999d")),
        ),
        (
            "timeout",
            Box::new(|h: &mut Value| h["timeout"] = json!("25h")),
        ),
        (
            "timeout",
            Box::new(|h: &mut Value| h["timeout"] = json!("soon")),
        ),
    ];
    for (field, mutate) in cases {
        let mut h = mail_handler();
        h["id"] = json!("mail2");
        mutate(&mut h);
        let (s, p) = app
            .call(Method::POST, "/v1/handlers", Some(&app.admin), Some(h))
            .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {p}");
        let fields: Vec<&str> = p["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert!(fields.contains(&field), "{field} not in {fields:?}");
    }
    let (_, list) = app
        .call(Method::GET, "/v1/handlers", Some(&app.admin), None)
        .await;
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "a rejected registration was stored"
    );

    // PUT replaces (secret kept), DELETE retires; history stays readable.
    let mut h = mail_handler();
    h["timeout"] = json!("99999999999d");
    let (s, p) = app
        .call(Method::PUT, "/v1/handlers/mail", Some(&app.admin), Some(h))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    let mut h = mail_handler();
    h["timeout"] = json!("24h");
    h["name"] = json!("Mailer 2");
    let (s, replaced) = app
        .call(Method::PUT, "/v1/handlers/mail", Some(&app.admin), Some(h))
        .await;
    assert_eq!(s, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["name"], "Mailer 2");
    let a = send(&app, &app.agent, "bob@example.com").await;
    let (s, retired) = app
        .call(Method::DELETE, "/v1/handlers/mail", Some(&app.admin), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(retired["retired_at"].is_string());
    let (s, _) = app
        .call(Method::POST, "/v1/actions", Some(&app.agent), Some(json!({"handler": "mail", "action": "send", "params": {"to": "a@b.c", "subject": "x"}})))
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{}", a["id"].as_str().unwrap()),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    app.stop().await;
}

#[tokio::test]
async fn zero_trust_end_to_end() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    // A fresh agent (default profile: everything asks) starts ungranted.
    let first = send(&app, &app.agent, "bob@example.com").await;
    assert_eq!(first["status"], "pending");
    assert_eq!(first["handler"], "mail");
    assert_eq!(first["permission"], "email.send");
    assert_eq!(first["scope"], json!({"recipient": "bob@example.com"}));
    assert_eq!(first["action_string"], "tool:mail:send to bob@example.com");
    assert_eq!(first["display"]["title"], "Email to bob@example.com");
    let first_id = first["id"].as_str().unwrap().to_owned();

    let g = grant(
        &app,
        json!({"agent": "agent-1", "handler": "mail", "permission": "email.send",
        "scope": {"recipient": "bob@example.com"}, "expires": "1h"}),
    )
    .await;
    let gid = g["id"].as_str().unwrap().to_owned();
    assert_eq!(g["active"], true);
    assert!(g["granted_by"].as_str().unwrap().starts_with("key:"));
    assert_eq!(g["approved_actions"], json!([first_id]));
    let (_, now) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{first_id}"),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(now["status"], "approved");
    assert_eq!(now["decided_by"], format!("grant:{gid}"));

    let second = send(&app, &app.agent, "bob@example.com").await;
    assert_eq!(second["status"], "approved");
    assert_eq!(second["decision"]["rule"]["kind"], "grant");
    assert_eq!(second["decision"]["rule"]["id"], gid.as_str());
    let carol = send(&app, &app.agent, "carol@example.com").await;
    assert_eq!(carol["status"], "pending");

    // After revocation bob asks again; what the grant allowed stays allowed.
    let (s, revoked) = app
        .call(
            Method::DELETE,
            &format!("/v1/grants/{gid}"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(revoked["active"], false);
    let (s, again) = app
        .call(
            Method::DELETE,
            &format!("/v1/grants/{gid}"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(again["revoked_at"], revoked["revoked_at"]);
    let third = send(&app, &app.agent, "bob@example.com").await;
    assert_eq!(third["status"], "pending");
    let (_, second_now) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{}", second["id"].as_str().unwrap()),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(second_now["status"], "approved");

    // A grant that expires: allowed while it lasts, asked after.
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    grant(
        &app,
        json!({"agent": "agent-1", "handler": "mail", "permission": "email.send",
        "scope": {"recipient": "dave@example.com"}, "expires": soon}),
    )
    .await;
    assert_eq!(
        send(&app, &app.agent, "dave@example.com").await["status"],
        "approved"
    );
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_eq!(
        send(&app, &app.agent, "dave@example.com").await["status"],
        "pending"
    );
    let (_, active) = app
        .call(
            Method::GET,
            "/v1/grants?active=true",
            Some(&app.operator),
            None,
        )
        .await;
    assert!(active.as_array().unwrap().is_empty(), "{active}");
    let (_, all) = app
        .call(
            Method::GET,
            "/v1/grants?handler=mail",
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(all.as_array().unwrap().len(), 2);
    app.stop().await;
}

#[tokio::test]
async fn glob_scopes_and_any_agent_grants() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let other = app.key("agent", Some("agent-2")).await;
    grant(
        &app,
        json!({"agent": "agent-1", "handler": "mail", "permission": "email.send",
        "scope": {"recipient": "*@example.com"}, "expires": "today"}),
    )
    .await;
    assert_eq!(
        send(&app, &app.agent, "bob@example.com").await["status"],
        "approved"
    );
    assert_eq!(
        send(&app, &app.agent, "bob@example.com.evil.net").await["status"],
        "pending"
    );
    assert_eq!(
        send(&app, &other, "bob@example.com").await["status"],
        "pending",
        "an agent-1 grant applied to agent-2"
    );
    // A grant for any agent covers both, and approves agent-2's pending one.
    let g = grant(
        &app,
        json!({"handler": "mail", "permission": "email.send",
        "scope": {"recipient": "*@example.org"}, "expires": "indefinite"}),
    )
    .await;
    assert!(g["agent"].is_null());
    assert!(g["expires_at"].is_null());
    let pending = send(&app, &other, "x@example.org").await;
    assert_eq!(pending["status"], "approved");
    assert_eq!(
        send(&app, &app.agent, "y@example.org").await["status"],
        "approved"
    );
    // permissions/check answers for the calling agent.
    let (_, yes) = app
        .call(Method::POST, "/v1/permissions/check", Some(&other), Some(json!({"handler": "mail", "permission": "email.send", "scope": {"recipient": "z@example.org"}})))
        .await;
    assert_eq!(yes["granted"], true);
    assert_eq!(yes["grant_id"], g["id"]);
    let (_, no) = app
        .call(Method::POST, "/v1/permissions/check", Some(&other), Some(json!({"handler": "mail", "permission": "email.send", "scope": {"recipient": "z@example.com"}})))
        .await;
    assert_eq!(no["granted"], false);
    app.stop().await;
}

#[tokio::test]
async fn schema_violations_are_all_listed_and_nothing_is_stored() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({
                "handler": "mail", "action": "send",
                "params": {"to": 5, "subject": "x".repeat(300), "extra": true, "api_token": 7}
            })),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    let fields: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    for f in ["params/to", "params/subject", "params", "params/api_token"] {
        assert!(fields.contains(&f), "{f} missing in {fields:?}");
    }
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"handler": "mail", "action": "nope", "params": {}})),
        )
        .await;
    // A handler, action or permission that does not exist is "not found".
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(
        p["detail"].as_str().unwrap().contains("no action 'nope'"),
        "{p}"
    );
    let (s, _) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"handler": "nope", "action": "send", "params": {}})),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, page) = app
        .call(Method::GET, "/v1/actions", Some(&app.operator), None)
        .await;
    assert!(page["items"].as_array().unwrap().is_empty());
    app.stop().await;
}

#[tokio::test]
async fn sensitive_params_are_masked_in_responses_and_events() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let a = send(&app, &app.agent, "bob@example.com").await;
    let id = a["id"].as_str().unwrap();
    assert_eq!(a["params"]["api_token"], "***");
    assert_eq!(a["params"]["to"], "bob@example.com");
    assert_eq!(a["display"]["fields"][0]["value"], "***");
    let (_, got) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&app.operator),
            None,
        )
        .await;
    let (_, list) = app
        .call(Method::GET, "/v1/actions", Some(&app.operator), None)
        .await;
    let (_, approved) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&app.operator),
            None,
        )
        .await;
    for body in [&a, &got, &list, &approved] {
        assert!(!body.to_string().contains("tok-SECRET-123"), "{body}");
    }
    // The event log (the audit trail) never holds the secret either.
    let store = actiongate_gate::storage::Store::open(
        &app.dir.path().join("actiongate.db"),
        Default::default(),
    )
    .await
    .unwrap();
    let events = store.events_after(0, None, 1000).await.unwrap();
    assert!(events.iter().any(|e| e.kind == "permission.needed"));
    for e in &events {
        assert!(!e.data.get().contains("tok-SECRET-123"), "{:?}", e);
    }
    app.stop().await;
}

#[tokio::test]
async fn agents_cannot_grant_or_decide() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let a = send(&app, &app.agent, "bob@example.com").await;
    let id = a["id"].as_str().unwrap();
    let (_, gr) = app
        .call(
            Method::POST,
            "/v1/grant-requests",
            Some(&app.agent),
            Some(
                json!({"handler": "mail", "permission": "email.send", "scope": {}, "reason": "r"}),
            ),
        )
        .await;
    let gr = gr["id"].as_str().unwrap();
    let k = app.agent.clone();
    let attempts: Vec<(Method, String, Option<Value>)> = vec![
        (
            Method::POST,
            "/v1/grants".into(),
            Some(
                json!({"handler": "mail", "permission": "email.send", "scope": {}, "expires": "1h"}),
            ),
        ),
        (Method::GET, "/v1/grants".into(), None),
        (Method::GET, "/v1/grants/grt_x".into(), None),
        (Method::DELETE, "/v1/grants/grt_x".into(), None),
        (
            Method::POST,
            format!("/v1/actions/{id}/approve"),
            Some(json!({"remember": {"expires": "1h"}})),
        ),
        (Method::POST, format!("/v1/actions/{id}/deny"), None),
        (
            Method::POST,
            format!("/v1/actions/{id}/reply"),
            Some(json!({"text": "yes"})),
        ),
        (
            Method::POST,
            format!("/v1/grant-requests/{gr}/approve"),
            None,
        ),
        (Method::POST, format!("/v1/grant-requests/{gr}/deny"), None),
        (Method::POST, "/v1/handlers".into(), Some(mail_handler())),
        (Method::GET, "/v1/handlers".into(), None),
        (
            Method::PUT,
            "/v1/handlers/mail".into(),
            Some(mail_handler()),
        ),
        (Method::DELETE, "/v1/handlers/mail".into(), None),
    ];
    for (m, path, body) in attempts {
        let (s, p) = app.call(m.clone(), &path, Some(&k), body).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{m} {path}: {p}");
    }
    let (_, still) = app
        .call(Method::GET, &format!("/v1/actions/{id}"), Some(&k), None)
        .await;
    assert_eq!(still["status"], "pending");
    let (_, grants) = app
        .call(Method::GET, "/v1/grants", Some(&app.operator), None)
        .await;
    assert!(grants.as_array().unwrap().is_empty());
    app.stop().await;
}

#[tokio::test]
async fn approve_and_remember_grants_the_scope() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let a = send(&app, &app.agent, "bob@example.com").await;
    let b = send(&app, &app.agent, "bob@example.com").await;
    let (s, approved) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{}/approve", a["id"].as_str().unwrap()),
            Some(&app.operator),
            Some(json!({"note": "ok", "remember": {"expires": "1h"}})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{approved}");
    assert_eq!(approved["status"], "approved");
    assert!(approved["decided_by"].as_str().unwrap().starts_with("key:"));
    // The other pending one the grant covers is approved by the grant.
    let (_, b_now) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{}", b["id"].as_str().unwrap()),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(b_now["status"], "approved");
    assert!(b_now["decided_by"].as_str().unwrap().starts_with("grant:"));
    assert_eq!(
        send(&app, &app.agent, "bob@example.com").await["status"],
        "approved"
    );
    assert_eq!(
        send(&app, &app.agent, "carol@example.com").await["status"],
        "pending"
    );
    // Approving a settled action with remember is a conflict and grants nothing.
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{}/approve", a["id"].as_str().unwrap()),
            Some(&app.operator),
            Some(json!({"remember": {"expires": "1h", "scope": {"recipient": "*"}}})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (_, grants) = app
        .call(Method::GET, "/v1/grants", Some(&app.operator), None)
        .await;
    assert_eq!(grants.as_array().unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn decision_only_grants_are_shell_aware() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    grant(
        &app,
        json!({"agent": "agent-1", "tool": "bash", "pattern": "npm test( .*)?", "expires": "1h"}),
    )
    .await;
    assert_eq!(
        app.request("bash", "npm test --watch").await.1["status"],
        "approved"
    );
    assert_eq!(
        app.request("bash", "npm test; rm -rf ~").await.1["status"],
        "pending"
    );
    assert_eq!(
        app.request("bash", "npm test $(curl evil)").await.1["status"],
        "pending"
    );
    // Remember on a decision-only action grants exactly that detail.
    let (_, a) = app.request("bash", "make build").await;
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{}/approve", a["id"].as_str().unwrap()),
            Some(&app.operator),
            Some(json!({"remember": {"expires": "30m"}})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        app.request("bash", "make build").await.1["status"],
        "approved"
    );
    assert_eq!(
        app.request("bash", "make build && make install").await.1["status"],
        "pending"
    );
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(json!({"tool": "bash", "pattern": "(", "expires": "1h"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    assert_eq!(p["errors"][0]["field"], "pattern");
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(json!({"tool": "bash", "pattern": "x", "expires": "yesterday"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    assert_eq!(p["errors"][0]["field"], "expires");
    // Only what the schema's pattern takes: no compound or padded forms.
    let count = || async {
        let (_, grants) = app
            .call(Method::GET, "/v1/grants", Some(&app.operator), None)
            .await;
        grants.as_array().map_or(0, Vec::len)
    };
    let before = count().await;
    for bad in ["1h 30m", " 1h", "10000d", "Today"] {
        let (s, p) = app
            .call(
                Method::POST,
                "/v1/grants",
                Some(&app.operator),
                Some(json!({"tool": "bash", "pattern": "x", "expires": bad})),
            )
            .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {p}");
        assert_eq!(p["errors"][0]["field"], "expires");
    }
    assert_eq!(count().await, before);
    // A filter no grant could match is named, not answered with "none".
    for (query, field) in [("agent=bad%20agent", "agent"), ("handler=Bad!", "handler")] {
        let (s, p) = app
            .call(
                Method::GET,
                &format!("/v1/grants?{query}"),
                Some(&app.operator),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {p}");
        assert_eq!(p["errors"][0]["field"], field);
    }
    app.stop().await;
}

#[tokio::test]
async fn grant_request_approved_with_a_narrower_scope() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let pending = send(&app, &app.agent, "bob@example.com").await;
    let req = {
        let client = app.client.clone();
        let url = format!("{}/v1/grant-requests?wait=20", app.base);
        let key = app.agent.clone();
        tokio::spawn(async move {
            client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"handler": "mail", "permission": "email.send", "scope": {"recipient": "*@example.com"}, "reason": "newsletter", "expires": "2h"}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    let mut id = String::new();
    for _ in 0..100 {
        let (_, list) = app
            .call(
                Method::GET,
                "/v1/grant-requests?status=pending",
                Some(&app.operator),
                None,
            )
            .await;
        if let Some(r) = list.as_array().unwrap().first() {
            id = r["id"].as_str().unwrap().to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!id.is_empty());
    // Wider than asked, or longer, is refused.
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/grant-requests/{id}/approve"),
            Some(&app.operator),
            Some(json!({"scope": {"recipient": "*"}})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/grant-requests/{id}/approve"),
            Some(&app.operator),
            Some(json!({"expires": "3h"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, approved) = app
        .call(
            Method::POST,
            &format!("/v1/grant-requests/{id}/approve"),
            Some(&app.operator),
            Some(json!({"scope": {"recipient": "bob@example.com"}, "expires": "1h"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{approved}");
    let answer = req.await.unwrap();
    assert_eq!(answer["status"], "approved");
    assert_eq!(
        answer["grant"]["scope"],
        json!({"recipient": "bob@example.com"})
    );
    // The grant approved the pending action it covers; carol is still asked.
    let (_, now) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{}", pending["id"].as_str().unwrap()),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(now["status"], "approved");
    assert_eq!(
        send(&app, &app.agent, "carol@example.com").await["status"],
        "pending"
    );
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/grant-requests/{id}/deny"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    app.stop().await;
}

/// Creates a pending grant request for `mail`'s `email.send`, asking `expires`.
async fn pending_grant_request(app: &TestApp, expires: &str) -> String {
    let (s, r) = app
        .call(Method::POST, "/v1/grant-requests", Some(&app.agent),
            Some(json!({"handler": "mail", "permission": "email.send", "scope": {}, "reason": "r", "expires": expires})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    r["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_grant_request_is_approved_with_the_expiry_it_asked_for_spelled_out() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let id = pending_grant_request(&app, "1h").await;
    // Asked 1h: a minute later, "1h" is still exactly what was asked.
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/grant-requests/{id}/approve"),
            Some(&app.operator),
            Some(json!({"expires": "61m"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    assert_eq!(p["errors"][0]["field"], "expires");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (s, r) = app
        .call(
            Method::POST,
            &format!("/v1/grant-requests/{id}/approve"),
            Some(&app.operator),
            Some(json!({"expires": "1h"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["status"], "approved");
    app.stop().await;
}

/// Approves grant request `id` with `expires` (none: as asked).
async fn approve_grant_request(
    app: &TestApp,
    id: &str,
    expires: Option<&str>,
) -> (StatusCode, Value) {
    let body = expires.map(|e| json!({"expires": e}));
    app.call(
        Method::POST,
        &format!("/v1/grant-requests/{id}/approve"),
        Some(&app.operator),
        body,
    )
    .await
}

/// For a grant request asking `asked`: each of `longer` is refused with a
/// problem naming `expires`, then `asked` spelled out is approved (after a
/// second, so that a duration counted from the approval would be longer
/// than one counted from the request), and the grant expires as it says.
async fn approvable_as_asked(asked: &str, longer: &[&str]) -> Value {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let id = pending_grant_request(&app, asked).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for expires in longer {
        let (s, p) = approve_grant_request(&app, &id, Some(expires)).await;
        assert_eq!(
            s,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{asked} {expires}: {p}"
        );
        assert_eq!(p["errors"][0]["field"], "expires", "{p}");
        assert!(p.to_string().contains("outlast"), "{p}");
    }
    let (s, r) = approve_grant_request(&app, &id, Some(asked)).await;
    assert_eq!(s, StatusCode::OK, "{asked}: {r}");
    assert_eq!(r["status"], "approved");
    let (s, grants) = app
        .call(Method::GET, "/v1/grants", Some(&app.operator), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    let grant = grants["items"]
        .as_array()
        .or(grants.as_array())
        .and_then(|g| g.first())
        .cloned()
        .unwrap_or_else(|| panic!("{grants}"));
    app.stop().await;
    grant
}

fn expires_at(grant: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    grant["expires_at"]
        .as_str()
        .map(|t| chrono::DateTime::parse_from_rfc3339(t).unwrap().into())
}

#[tokio::test]
async fn a_grant_request_for_30m_is_approvable_as_asked_and_not_longer() {
    let grant = approvable_as_asked("30m", &["31m", "1h", "indefinite"]).await;
    let left = expires_at(&grant).unwrap() - chrono::Utc::now();
    assert!(
        left > chrono::Duration::minutes(29) && left <= chrono::Duration::minutes(30),
        "{grant}"
    );
}

#[tokio::test]
async fn a_grant_request_for_2d_is_approvable_as_asked_and_not_longer() {
    let grant = approvable_as_asked("2d", &["49h", "3d", "indefinite"]).await;
    let left = expires_at(&grant).unwrap() - chrono::Utc::now();
    assert!(
        left > chrono::Duration::hours(47) && left <= chrono::Duration::hours(48),
        "{grant}"
    );
}

#[tokio::test]
async fn a_grant_request_for_today_is_approvable_as_asked_and_not_longer() {
    // Whatever the hour, two days from the request outlast today.
    let grant = approvable_as_asked("today", &["2d", "indefinite"]).await;
    let end = expires_at(&grant).unwrap();
    assert!(end > chrono::Utc::now(), "{grant}");
    assert!(
        end - chrono::Utc::now() <= chrono::Duration::hours(24),
        "{grant}"
    );
}

#[tokio::test]
async fn a_grant_request_for_indefinite_is_approvable_as_asked() {
    let grant = approvable_as_asked("indefinite", &[]).await;
    assert_eq!(expires_at(&grant), None, "{grant}");
}

#[tokio::test]
async fn a_grant_request_for_an_rfc3339_time_is_approvable_as_asked_and_not_longer() {
    let at = (chrono::Utc::now() + chrono::Duration::hours(3))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let later = (chrono::Utc::now() + chrono::Duration::hours(3) + chrono::Duration::minutes(1))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let grant = approvable_as_asked(&at, &[&later, "4h", "indefinite"]).await;
    assert_eq!(
        expires_at(&grant),
        Some(chrono::DateTime::parse_from_rfc3339(&at).unwrap().into()),
        "{grant}"
    );
}

#[tokio::test]
async fn answering_a_grant_request_twice_names_the_grant_request() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let id = pending_grant_request(&app, "1h").await;
    let approve = format!("/v1/grant-requests/{id}/approve");
    let (s, _) = app
        .call(Method::POST, &approve, Some(&app.operator), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    // Another operator's approval, or this one's denial (its own approval
    // sent again is answered as it stands: `decision_retries`).
    let other = app.key("operator", None).await;
    for (path, key) in [
        (approve.clone(), &other),
        (format!("/v1/grant-requests/{id}/deny"), &app.operator),
    ] {
        let (s, p) = app.call(Method::POST, &path, Some(key), None).await;
        assert_eq!(s, StatusCode::CONFLICT, "{p}");
        assert_eq!(p["code"], "grant-request-settled", "{p}");
        assert_eq!(p["current_status"], "approved", "{p}");
        assert!(
            p["detail"].as_str().unwrap().contains("grant request"),
            "{p}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn unanswered_grant_requests_expire_and_denials_carry_a_reason() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let (s, r) = app
        .call(Method::POST, "/v1/grant-requests?wait=10", Some(&app.agent),
            Some(json!({"handler": "mail", "permission": "email.send", "scope": {}, "reason": "r", "timeout": "1s"})))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(r["status"], "expired", "{r}");
    let (_, r) = app
        .call(
            Method::POST,
            "/v1/grant-requests",
            Some(&app.agent),
            Some(
                json!({"handler": "mail", "permission": "email.send", "scope": {}, "reason": "r"}),
            ),
        )
        .await;
    let id = r["id"].as_str().unwrap();
    let (_, d) = app
        .call(
            Method::POST,
            &format!("/v1/grant-requests/{id}/deny"),
            Some(&app.operator),
            Some(json!({"reason": "no"})),
        )
        .await;
    assert_eq!(d["status"], "denied");
    assert_eq!(d["deny_reason"], "no");
    let (s, _) = app
        .call(
            Method::POST,
            "/v1/grant-requests",
            Some(&app.agent),
            Some(
                json!({"handler": "mail", "permission": "email.nope", "scope": {}, "reason": "r"}),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // A scope value the permission's schema refuses could never match an
    // action: refused when asked for, and when granted.
    for (path, key) in [
        ("/v1/grant-requests", &app.agent),
        ("/v1/grants", &app.operator),
    ] {
        for bad in [json!({"recipient": 7}), json!({"recipient": ["a"]})] {
            let mut body = json!({"handler": "mail", "permission": "email.send", "scope": bad,
                "expires": "1h"});
            if path.ends_with("requests") {
                body["reason"] = json!("r");
            }
            let (s, p) = app.call(Method::POST, path, Some(key), Some(body)).await;
            assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{path} {bad}: {p}");
            assert_eq!(p["errors"][0]["field"], "scope.recipient", "{p}");
        }
    }
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(json!({"handler": "mail", "permission": "email.send",
                "scope": {"recipient": "*@example.com"}, "expires": "1h"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    app.stop().await;
}

#[tokio::test]
async fn tools_in_each_dialect() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    let (_, openai) = app
        .call(
            Method::GET,
            "/v1/tools?format=openai",
            Some(&app.agent),
            None,
        )
        .await;
    let t = &openai["tools"][0];
    assert_eq!(t["type"], "function");
    assert_eq!(t["function"]["name"], "mail__send");
    assert_eq!(t["function"]["description"], "Send one email");
    assert_eq!(
        t["function"]["parameters"]["required"],
        json!(["to", "subject"])
    );
    let (_, anthropic) = app
        .call(
            Method::GET,
            "/v1/tools?format=anthropic",
            Some(&app.agent),
            None,
        )
        .await;
    let t = &anthropic["tools"][0];
    assert_eq!(t["name"], "mail__send");
    assert_eq!(t["input_schema"]["type"], "object");
    assert!(t.get("type").is_none());
    let (_, mcp) = app
        .call(Method::GET, "/v1/tools?format=mcp", Some(&app.agent), None)
        .await;
    let t = &mcp["tools"][0];
    assert_eq!(t["name"], "mail__send");
    assert_eq!(t["inputSchema"]["properties"]["to"]["type"], "string");
    let (s, _) = app
        .call(Method::GET, "/v1/tools?format=xml", Some(&app.agent), None)
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    app.stop().await;
}

#[tokio::test]
async fn a_handler_cannot_take_a_built_in_tools_name() {
    let app = TestApp::spawn().await;
    for id in ["git", "bash", "file", "permission"] {
        let mut reg = mail_handler();
        reg["id"] = json!(id);
        let (s, p) = app
            .call(Method::POST, "/v1/handlers", Some(&app.admin), Some(reg))
            .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{id}: {p}");
        assert_eq!(p["errors"][0]["field"], "id", "{p}");
    }
    let (_, list) = app
        .call(Method::GET, "/v1/handlers", Some(&app.admin), None)
        .await;
    assert_eq!(list, json!([]));
    app.stop().await;
}

/// A handler registered again with an action whose scope reads another
/// param: the grants of that permission are revoked (an old
/// `recipient: *@example.com` must not now judge a different field), and
/// the answer says so; a registration that keeps the scopes keeps them.
#[tokio::test]
async fn registering_a_handler_again_with_moved_scopes_revokes_their_grants() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    register(&app).await;
    grant(
        &app,
        json!({"agent": "agent-1", "handler": "mail", "permission": "email.send",
        "scope": {"recipient": "*@example.com"}, "expires": "today"}),
    )
    .await;
    assert_eq!(
        send(&app, &app.agent, "bob@example.com").await["status"],
        "approved"
    );
    // The same registration again: the grant stays.
    let (s, body) = app
        .call(
            Method::PUT,
            "/v1/handlers/mail",
            Some(&app.admin),
            Some(mail_handler()),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(
        send(&app, &app.agent, "bob@example.com").await["status"],
        "approved"
    );
    // The scope now reads `subject`: the grant is gone.
    let mut moved = mail_handler();
    moved["actions"][0]["scope"] = json!({"recipient": "/subject"});
    let (s, body) = app
        .call(
            Method::PUT,
            "/v1/handlers/mail",
            Some(&app.admin),
            Some(moved),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert!(body.to_string().contains("revoked 1 grant"), "{body}");
    let (s, a) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"handler": "mail", "action": "send",
                        "params": {"to": "evil@evil.net", "subject": "x@example.com"}})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    app.stop().await;
}
