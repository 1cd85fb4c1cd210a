//! An approval says which version of the action its approver read (`seen`):
//! the daemon refuses it, in the transaction that would record it, when
//! someone edited the action meanwhile, through the API and the CLI.

use std::process::{Command, Output};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{binary, call};
use crate::teams::{Team, approve, get, named_operator, pending, person_key, team};

fn cli(base: &str, key: &str, args: &[&str]) -> Output {
    Command::new(binary("actiongate"))
        .args(args)
        .env("ACTIONGATE_URL", base)
        .env("ACTIONGATE_KEY", key)
        .output()
        .unwrap()
}

fn approvals(a: &Value) -> usize {
    a["approvals"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_of_the_action_as_asked_is_refused_once_someone_edited_it() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])).await;
    let ann = person_key(&http, &d.base, &admin, "ann").await;
    let bea = person_key(&http, &d.base, &admin, "bea").await;

    // Bea reads `prod eu`; Ann edits it into `prod eu-west` with the first
    // approval; Bea's approval of what she read counts nothing.
    let id = pending(&http, &d.base, &agent, "deploy", "prod eu").await;
    let (s, a) = approve(&http, &d.base, &ann, &id, json!({"detail": "prod eu-west"})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["edited"], true, "{a}");
    let (s, p) = approve(&http, &d.base, &bea, &id, json!({"seen": "asked"})).await;
    assert_eq!(s, 409, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("edited"), "{p}");
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!((a["status"].as_str(), approvals(&a)), (Some("pending"), 1));
    // An approval that does not say what it read is of the action as
    // asked: refused as well, and so is a reply by words.
    let (s, p) = approve(&http, &d.base, &bea, &id, json!({})).await;
    assert_eq!(s, 409, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("edited"), "{p}");
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions/{id}/reply", d.base),
        &bea,
        Some(json!({"text": "yes"})),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!((a["status"].as_str(), approvals(&a)), (Some("pending"), 1));

    // The CLI approves the action as asked unless told `--edited`: refused
    // with exit 5 and the reason on one line; `show` prints the edit.
    let out = cli(&d.base, &bea, &["approve", &id]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("edited") && err.lines().count() == 1, "{err}");
    assert_eq!(approvals(&get(&http, &d.base, &admin, &id).await), 1);
    let out = cli(&d.base, &bea, &["show", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("edited to: prod eu-west"), "{text}");
    assert!(
        text.contains("team:      [1 of 2: ann") && text.contains("[edited]"),
        "{text}"
    );
    let out = cli(&d.base, &bea, &["approve", &id, "--edited"]);
    assert!(out.status.success(), "{out:?}");
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["status"], "approved", "{a}");
    assert_eq!(a["approved_detail"], "prod eu-west", "{a}");

    // An approval of an edit the action does not have is refused too.
    let id = pending(&http, &d.base, &agent, "deploy", "prod us").await;
    let (s, p) = approve(&http, &d.base, &bea, &id, json!({"seen": "edited"})).await;
    assert_eq!(s, 409, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("nobody edited"),
        "{p}"
    );
    assert_eq!(approvals(&get(&http, &d.base, &admin, &id).await), 0);
    // And a value that is neither is bad input naming the field.
    let (s, p) = approve(&http, &d.base, &bea, &id, json!({"seen": "both"})).await;
    assert_eq!(s, 422, "{p}");
    assert!(p.to_string().contains("seen"), "{p}");
    // Without `seen`, an approval of an action nobody edited approves it.
    let (s, a) = approve(&http, &d.base, &bea, &id, json!({})).await;
    assert_eq!((s, approvals(&a)), (200, 1), "{a}");
}

/// Ann's edit and Bea's approval of the action as asked, racing: whichever
/// lands first, Bea's approval never counts toward the edited version.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_edit_racing_an_approval_as_asked_never_settles_a_version_unread() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])).await;
    let ann = person_key(&http, &d.base, &admin, "ann").await;
    let bea = person_key(&http, &d.base, &admin, "bea").await;
    for round in 0..20 {
        let id = pending(&http, &d.base, &agent, "deploy", &format!("prod {round}")).await;
        let url = format!("{}/v1/actions/{id}/approve", d.base);
        let edit = call(
            &http,
            Method::POST,
            url.clone(),
            &ann,
            Some(json!({"detail": format!("prod {round}-west")})),
        );
        let plain = call(
            &http,
            Method::POST,
            url,
            &bea,
            Some(json!({"seen": "asked"})),
        );
        let ((se, _), (sp, _)) = tokio::join!(edit, plain);
        let a = get(&http, &d.base, &admin, &id).await;
        // Exactly one of them landed, and the action holds what it did.
        assert_eq!(approvals(&a), 1, "round {round}: {a}");
        match (se, sp) {
            (200, 409) => assert_eq!(a["edited"], true, "round {round}: {a}"),
            (409, 200) => assert!(a["edited"] != true, "round {round}: {a}"),
            other => panic!("round {round}: {other:?}: {a}"),
        }
        assert_eq!(a["status"], "pending", "round {round}: {a}");
    }
}

/// `actiongate pending` shows how far each action needing a quorum has
/// come, and a decision names the person who made it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_a_quorum_s_progress_and_names_the_person_deciding() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])).await;
    let (ann, ann_id) = named_operator(&http, &d.base, &admin, "ann-key").await;
    let (bea, bea_id) = named_operator(&http, &d.base, &admin, "bea-key").await;
    for (name, key) in [("ann", &ann_id), ("bea", &bea_id)] {
        let (s, p) = call(
            &http,
            Method::POST,
            format!("{}/v1/people", d.base),
            &admin,
            Some(json!({"name": name, "keys": [key]})),
        )
        .await;
        assert_eq!(s, 201, "{p}");
    }
    let id = pending(&http, &d.base, &agent, "deploy", "prod eu").await;
    // What it needs shows from when it is asked, before any approval.
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["approvals_required"], 2, "{a}");
    let out = cli(&d.base, &bea, &["pending"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.contains("0/2"), "{text}");
    let out = cli(&d.base, &ann, &["approve", &id]);
    assert!(out.status.success(), "{out:?}");
    let out = cli(&d.base, &bea, &["pending"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let head = text.lines().next().unwrap();
    assert!(head.contains("APPROVALS"), "{text}");
    let row = text.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.contains("1/2 ann"), "{text}");

    let out = cli(&d.base, &bea, &["approve", &id]);
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.contains("[2 of 2: ann, bea]"), "{line}");
    let out = cli(&d.base, &bea, &["show", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    let decided = text.lines().find(|l| l.starts_with("decided:")).unwrap();
    assert!(
        decided.contains(&format!("by bea (key:{bea_id}, cli)")),
        "{text}"
    );
    // With nothing needing more than one approval, no such column.
    let one = pending(&http, &d.base, &agent, "deploy", "staging").await;
    let out = cli(&d.base, &bea, &["pending"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with(&one)), "{text}");
    assert!(!text.contains("APPROVALS"), "{text}");
}

/// An action is edited once: once its editor's approval lapsed (the key
/// revoked), another approver cannot edit it again, or an approval sent
/// "as edited" by someone who read the first edit would approve a second
/// one they never read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_is_edited_once_even_after_its_editor_s_approval_lapsed() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])).await;
    let (ann, ann_id) = named_operator(&http, &d.base, &admin, "ann-key").await;
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/people", d.base),
        &admin,
        Some(json!({"name": "ann", "keys": [ann_id]})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let bob = person_key(&http, &d.base, &admin, "bob").await;
    let cat = person_key(&http, &d.base, &admin, "cat").await;

    let id = pending(&http, &d.base, &agent, "deploy", "prod eu").await;
    let (s, a) = approve(
        &http,
        &d.base,
        &ann,
        &id,
        json!({"detail": "prod eu --canary 5%"}),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    // Bob reads the edit; Ann's key is revoked, her approval lapses.
    let (s, k) = call(
        &http,
        Method::DELETE,
        format!("{}/v1/keys/{ann_id}", d.base),
        &admin,
        None,
    )
    .await;
    assert!((200..300).contains(&s), "{k}");
    // Cat cannot edit it again.
    let (s, p) = approve(
        &http,
        &d.base,
        &cat,
        &id,
        json!({"detail": "prod eu --all-regions", "seen": "edited"}),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("edited once"), "{p}");
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["approved_detail"], "prod eu --canary 5%", "{a}");
    // What Bob read is still what would run: his and Cat's approvals of
    // it settle it.
    let (s, a) = approve(&http, &d.base, &bob, &id, json!({"seen": "edited"})).await;
    assert_eq!(s, 200, "{a}");
    let (s, a) = approve(&http, &d.base, &cat, &id, json!({"seen": "edited"})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    assert_eq!(a["approved_detail"], "prod eu --canary 5%", "{a}");
}
