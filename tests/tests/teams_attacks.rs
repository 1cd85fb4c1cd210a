//! Black-box tests from a second adversarial review of approvals for teams
//! (`docs/teams.md`): what a second identity of one person, a key that is
//! nobody's, or an approver of other actions could slip past a quorum or
//! an approver rule.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::call;
use crate::teams::{Team, approve, get, named_operator, pending, team};

/// Adds a person; their id.
async fn person(http: &reqwest::Client, base: &str, admin: &str, body: Value) -> String {
    let (s, p) = call(
        http,
        Method::POST,
        format!("{base}/v1/people"),
        admin,
        Some(body),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    p["id"].as_str().unwrap().to_owned()
}

/// Ann edits an action nobody's rule governed into one that needs two
/// release approvers; her second key, which is nobody's (and so no
/// release approver, and no person a quorum counts), approves "as edited"
/// at the same moment. Checked against the action as it was before the
/// edit (no rule: anyone, once), that approval must not complete the
/// quorum of the edited one: whatever the order, the action never ends
/// approved by Ann alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_key_racing_its_owners_edit_never_completes_the_edited_quorum() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([
        {"pattern": "tool:deploy:prod.*", "count": 2, "approvers": ["group:release"]}
    ]))
    .await;
    let (ann, ann_id) = named_operator(&http, &d.base, &admin, "ann-key").await;
    let (spare, _) = named_operator(&http, &d.base, &admin, "ann-laptop").await;
    person(
        &http,
        &d.base,
        &admin,
        json!({"name": "ann", "groups": ["release"], "keys": [ann_id]}),
    )
    .await;
    for round in 0..25 {
        let id = pending(
            &http,
            &d.base,
            &agent,
            "deploy",
            &format!("staging {round}"),
        )
        .await;
        let url = format!("{}/v1/actions/{id}/approve", d.base);
        let edit = call(
            &http,
            Method::POST,
            url.clone(),
            &ann,
            Some(json!({"detail": format!("prod {round}")})),
        );
        let seconds = (0..6u64).map(|i| {
            let (http, url, spare) = (http.clone(), url.clone(), spare.clone());
            async move {
                tokio::time::sleep(Duration::from_millis(i)).await;
                call(
                    &http,
                    Method::POST,
                    url,
                    &spare,
                    Some(json!({"seen": "edited"})),
                )
                .await
            }
        });
        let ((se, e), answers) = tokio::join!(edit, futures::future::join_all(seconds));
        let a = get(&http, &d.base, &admin, &id).await;
        assert_ne!(
            a["status"], "approved",
            "round {round}: the edit ({se}: {e}) and ann's second key ({answers:?}) approved a \
             prod deploy that needs two release approvers: {a}"
        );
    }
}
