//! `actiongate people` and `person add|set|rm`: the built binary against
//! the real daemon (docs/cli.md, docs/teams.md). A team registers its
//! people from the command line, and a key made a person's counts toward a
//! quorum that it did not count toward before.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;

use cli_support::ag;
use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn people_are_added_listed_replaced_and_removed_and_then_count_toward_a_quorum() {
    let app = TestApp::spawn().await;
    let admin = app.admin.clone();
    let (ann_id, ann) = app.issue("operator", None).await;
    let (bob_id, bob) = app.issue("operator", None).await;

    let r = ag(&app, &admin, &["people"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("no people"), "{r:?}");

    let r = ag(
        &app,
        &admin,
        &[
            "person", "add", "ann", "--group", "dba", "--key-id", &ann_id, "--slack", "U0ANN",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("person ann added (per_"), "{r:?}");
    let r = ag(&app, &admin, &["people"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let row = r.stdout.lines().nth(1).unwrap();
    for part in ["ann", "dba", ann_id.as_str(), "slack:U0ANN"] {
        assert!(row.contains(part), "{part}: {}", r.stdout);
    }

    // Bad input: one line naming the field, exit 5, nothing changes.
    let r = ag(
        &app,
        &admin,
        &["person", "add", "bob", "--telegram", "not-a-number"],
    )
    .await;
    assert_eq!(r.code, 5, "{r:?}");
    assert!(
        r.stderr.contains("chat.telegram") && r.stderr.lines().count() == 1,
        "{r:?}"
    );
    // An identity is one person's.
    let r = ag(&app, &admin, &["person", "add", "bob", "--key-id", &ann_id]).await;
    assert_eq!(r.code, 5, "{r:?}");
    // Operators do not keep people.
    let r = ag(&app, &ann, &["person", "add", "eve"]).await;
    assert_eq!(r.code, 5, "{r:?}");
    let (_, people) = app
        .call(Method::GET, "/v1/people", Some(&admin), None)
        .await;
    assert_eq!(people["items"].as_array().unwrap().len(), 1, "{people}");

    // A quorum of two: Bob's key is nobody's, so it does not count until
    // he is a person.
    app.profile(
        "agent-1",
        json!({"allow": [], "ask": ["(?s).*"], "approvals": [
            {"pattern": "tool:deploy:.*", "count": 2}
        ]}),
    )
    .await;
    let (s, a) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "deploy", "detail": "prod"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    let r = ag(&app, &ann, &["approve", &id]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = ag(&app, &bob, &["approve", &id]).await;
    assert_eq!(r.code, 5, "{r:?}");
    assert!(r.stderr.contains("belongs to no person"), "{r:?}");
    let r = ag(&app, &admin, &["person", "add", "bob", "--key-id", &bob_id]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = ag(&app, &bob, &["approve", &id]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let (_, a) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(a["status"], "approved", "{a}");
    let who: Vec<&str> = a["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["who"].as_str().unwrap())
        .collect();
    assert_eq!(who, ["ann", "bob"], "{a}");

    // `set` replaces by name: what is not given is gone; `--name` renames.
    let r = ag(
        &app,
        &admin,
        &[
            "person", "set", "ann", "--name", "ann-b", "--key-id", &ann_id, "--json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let p = r.json();
    assert_eq!(
        (&p["name"], &p["groups"], &p["chat"]),
        (&json!("ann-b"), &json!([]), &json!({})),
        "{p}"
    );
    let r = ag(&app, &admin, &["person", "rm", "ann-b"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "person ann-b removed", "{r:?}");
    let r = ag(&app, &admin, &["person", "rm", "ann-b"]).await;
    assert_eq!(r.code, 5, "{r:?}");
    assert!(r.stderr.contains("404"), "{r:?}");
    let r = ag(&app, &admin, &["people", "--json"]).await;
    let names: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["bob"]);
    app.stop().await;
}

/// `profile set` makes a file the agent's profile, keeps the agent's name,
/// and passes on the daemon's warning about a quorum nobody could meet;
/// `profile show` prints it.
#[tokio::test]
async fn profile_set_warns_of_a_quorum_the_people_cannot_meet_and_show_prints_it() {
    let app = TestApp::spawn().await;
    let admin = app.admin.clone();
    let (s, a) = app
        .call(
            Method::PUT,
            "/v1/agents/agent-1",
            Some(&admin),
            Some(json!({"name": "Release bot", "profile": "standard"})),
        )
        .await;
    assert!(s.is_success(), "{a}");
    let file = app.dir.path().join("quorum.json");
    std::fs::write(
        &file,
        json!({"allow": [], "ask": ["(?s).*"], "approvals": [
            {"pattern": "tool:deploy:.*", "count": 2}
        ]})
        .to_string(),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let r = ag(&app, &admin, &["profile", "set", "agent-1", path]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "profile of agent-1 set", "{r:?}");
    assert!(
        r.stderr.starts_with("warning: approvals rule #0") && r.stderr.contains("but 0 of"),
        "{r:?}"
    );
    let (_, a) = app
        .call(Method::GET, "/v1/agents/agent-1", Some(&admin), None)
        .await;
    assert_eq!(a["name"], "Release bot", "{a}");
    assert_eq!(a["profile"]["approvals"][0]["count"], 2, "{a}");

    for name in ["ann", "bob"] {
        let r = ag(&app, &admin, &["person", "add", name]).await;
        assert_eq!(r.code, 0, "{r:?}");
    }
    let r = ag(&app, &admin, &["profile", "set", "agent-1", path]).await;
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");
    let r = ag(&app, &admin, &["profile", "show", "agent-1"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["approvals"][0]["count"], 2, "{r:?}");
    // A file that is not a profile: the daemon's 422, exit 5, nothing set.
    std::fs::write(&file, "{\"allow\": [\"(\"]}").unwrap();
    let r = ag(&app, &admin, &["profile", "set", "agent-1", path]).await;
    assert_eq!(r.code, 5, "{r:?}");
    let r = ag(&app, &admin, &["profile", "show", "nobody"]).await;
    assert_eq!(r.code, 5, "{r:?}");
    app.stop().await;
}
