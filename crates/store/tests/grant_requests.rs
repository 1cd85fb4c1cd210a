//! Grant requests on both backends; on Postgres, answers and sweeps
//! racing from several nodes.

use actiongate_store::*;
use chrono::Utc;
use serde_json::json;

use crate::backends::{Kind, open, open_node, pg_database};

fn scope() -> serde_json::Map<String, serde_json::Value> {
    serde_json::Map::from_iter([("path".to_owned(), json!("/a"))])
}

fn request(agent: &str, deadline_in: chrono::Duration) -> NewGrantRequest {
    NewGrantRequest {
        id: uuid::Uuid::now_v7().to_string(),
        agent: agent.to_owned(),
        handler: "files".to_owned(),
        permission: "fs.write".to_owned(),
        scope: scope(),
        reason: Some("to write /a".to_owned()),
        expires: Some("1h".to_owned()),
        deadline: Utc::now() + deadline_in,
        session: None,
        uses: None,
    }
}

fn grant_for(r: &GrantRequest) -> NewGrant {
    NewGrant {
        session: None,
        uses: None,
        id: uuid::Uuid::now_v7().to_string(),
        agent: Some(r.agent.clone()),
        target: NewGrantTarget::Permission {
            handler: r.handler.clone(),
            permission: r.permission.clone(),
            scope: r.scope.clone(),
        },
        granted_by: "operator:k".to_owned(),
        expires_at: Some(Utc::now() + chrono::Duration::hours(1)),
        note: None,
    }
}

/// A pending handler action of `agent` that a grant of `fs.write` on `/a`
/// covers.
fn pending_write(agent: &str) -> NewAction {
    let decision = Decision {
        result: DecisionResult::Ask,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        deadline: Some(Utc::now() + chrono::Duration::minutes(5)),
        handler: Some(HandlerAction {
            handler: "files".to_owned(),
            action: "write".to_owned(),
            params: json!({"path": "/a"}),
            params_view: json!({"path": "/a"}),
            permission: "fs.write".to_owned(),
            scope: scope(),
            display: None,
            hints: None,
            claim_until: None,
        }),
        ..NewAction::new(
            agent.to_owned(),
            "files".to_owned(),
            "write".to_owned(),
            decision,
        )
    }
}

const MINUTE: chrono::Duration = chrono::Duration::minutes(1);

async fn an_approved_request_creates_its_grant_in_the_same_commit(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (waiting, _) = store.insert_action(pending_write("a")).await.unwrap();
    let mut events = store.subscribe();
    let r = store
        .create_grant_request(request("a", MINUTE))
        .await
        .unwrap();
    assert_eq!(r.status, GrantRequestStatus::Pending);
    assert_eq!(r.scope, scope());
    assert_eq!(r.grant, None);
    let ev = events.recv().await.unwrap();
    assert_eq!(ev.kind, "grant_request.created");
    assert_eq!(ev.data.to_value()["id"], json!(r.id));

    let grant = grant_for(&r);
    let (answered, created) = store
        .approve_grant_request(&r.id, grant.clone())
        .await
        .unwrap();
    assert_eq!(answered.status, GrantRequestStatus::Approved);
    assert_eq!(answered.decided_by.as_deref(), Some("operator:k"));
    assert_eq!(answered.grant.as_ref().map(|g| &g.id), Some(&grant.id));
    assert_eq!(created.grant.id, grant.id);
    assert_eq!(
        created.approved.iter().map(|a| &a.id).collect::<Vec<_>>(),
        [&waiting.id],
        "the grant approves what it covers"
    );
    let kinds: Vec<String> = [
        events.recv().await.unwrap(),
        events.recv().await.unwrap(),
        events.recv().await.unwrap(),
    ]
    .iter()
    .map(|e| e.kind.clone())
    .collect();
    assert_eq!(
        kinds,
        ["grant.created", "action.approved", "grant_request.approved"]
    );
    assert_eq!(store.get_grant_request(&r.id).await.unwrap(), answered);

    // Answered once: a second approval or a denial loses.
    let again = store.approve_grant_request(&r.id, grant_for(&r)).await;
    assert!(
        matches!(&again, Err(StoreError::WrongState { current }) if current == "approved"),
        "{again:?}"
    );
    let deny = store.deny_grant_request(&r.id, "op".to_owned(), None).await;
    assert!(matches!(deny, Err(StoreError::WrongState { .. })));
    assert_eq!(
        store
            .list_grants(&GrantFilter::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(events.try_recv().is_err(), "no event for a lost answer");
    assert!(matches!(
        store.get_grant_request("nope").await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.approve_grant_request("nope", grant_for(&r)).await,
        Err(StoreError::NotFound)
    ));
}

async fn requests_are_denied_expired_and_listed(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let later = store
        .create_grant_request(request("a", MINUTE))
        .await
        .unwrap();
    let overdue = store
        .create_grant_request(request("a", chrono::Duration::milliseconds(-5)))
        .await
        .unwrap();
    let denied = store
        .create_grant_request(request("b", MINUTE))
        .await
        .unwrap();
    assert_eq!(
        store
            .next_grant_request_deadline()
            .await
            .unwrap()
            .map(|d| d.timestamp_millis()),
        Some(overdue.deadline.timestamp_millis())
    );
    let d = store
        .deny_grant_request(&denied.id, "op".to_owned(), Some("no".to_owned()))
        .await
        .unwrap();
    assert_eq!(d.status, GrantRequestStatus::Denied);
    assert_eq!(d.deny_reason.as_deref(), Some("no"));
    assert_eq!(d.decided_by.as_deref(), Some("op"));

    let mut events = store.subscribe();
    let expired = store.expire_grant_requests(Utc::now()).await.unwrap();
    assert_eq!(
        expired.iter().map(|r| &r.id).collect::<Vec<_>>(),
        [&overdue.id]
    );
    assert_eq!(expired[0].status, GrantRequestStatus::Expired);
    assert_eq!(expired[0].decided_by.as_deref(), Some("deadline"));
    assert_eq!(events.recv().await.unwrap().kind, "grant_request.expired");
    assert!(
        store
            .expire_grant_requests(Utc::now())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(events.try_recv().is_err());
    assert_eq!(
        store
            .next_grant_request_deadline()
            .await
            .unwrap()
            .map(|d| d.timestamp_millis()),
        Some(later.deadline.timestamp_millis())
    );

    let ids = |rs: &[GrantRequest]| rs.iter().map(|r| &r.id).cloned().collect::<Vec<String>>();
    let all = ids(&store
        .list_grant_requests(None, None, &Page::newest(500))
        .await
        .unwrap());
    assert_eq!(
        all,
        [denied.id, overdue.id.clone(), later.id.clone()],
        "newest first"
    );
    let of_a = ids(&store
        .list_grant_requests(Some("a"), None, &Page::newest(500))
        .await
        .unwrap());
    assert_eq!(of_a, [overdue.id, later.id.clone()]);
    let pending = store
        .list_grant_requests(None, Some(GrantRequestStatus::Pending), &Page::newest(500))
        .await
        .unwrap();
    assert_eq!(ids(&pending), [later.id]);
    let expired_of_b = store
        .list_grant_requests(
            Some("b"),
            Some(GrantRequestStatus::Expired),
            &Page::newest(500),
        )
        .await
        .unwrap();
    assert!(expired_of_b.is_empty());
}

/// A request made again under its key is the first, stored once, as it
/// now stands; another request under the key is a conflict; another
/// agent's key is its own.
async fn a_keyed_request_is_stored_once_per_agent_and_key(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let key = |hash: &str| RequestKey {
        key: "k1".to_owned(),
        request_hash: hash.to_owned(),
    };
    let hour = chrono::Duration::hours(1);
    let (first, created) = store
        .create_grant_request_once(request("a", hour), key("h1"))
        .await
        .unwrap();
    assert!(created);
    store
        .deny_grant_request(&first.id, "op".to_owned(), None)
        .await
        .unwrap();
    let (again, created) = store
        .create_grant_request_once(request("a", hour), key("h1"))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again.id, first.id);
    assert_eq!(again.status, GrantRequestStatus::Denied);
    let found = store.grant_request_for_key("a", &key("h1")).await.unwrap();
    assert_eq!(found.map(|r| r.id), Some(first.id.clone()));
    let other = store
        .create_grant_request_once(request("a", hour), key("h2"))
        .await;
    assert!(matches!(other, Err(StoreError::Conflict(_))), "{other:?}");
    let looked = store.grant_request_for_key("a", &key("h2")).await;
    assert!(matches!(looked, Err(StoreError::Conflict(_))), "{looked:?}");
    let (theirs, created) = store
        .create_grant_request_once(request("b", hour), key("h1"))
        .await
        .unwrap();
    assert!(created);
    assert_ne!(theirs.id, first.id);
}

crate::conformance!(
    an_approved_request_creates_its_grant_in_the_same_commit,
    requests_are_denied_expired_and_listed,
    a_keyed_request_is_stored_once_per_agent_and_key,
);

/// Three nodes: approvals, denials and sweeps of the same requests at
/// once. Each request is answered once, one event each, and an approved
/// request has exactly its one grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_and_sweeps_racing_on_three_nodes_answer_each_request_once() {
    let Some(url) = pg_database() else {
        return;
    };
    let nodes = [
        open_node(&url).await,
        open_node(&url).await,
        open_node(&url).await,
    ];
    let mut ids = Vec::new();
    for i in 0..20 {
        // Half are overdue at once: sweepers race the operators for them.
        let due = if i % 2 == 0 {
            chrono::Duration::milliseconds(-1)
        } else {
            MINUTE
        };
        ids.push(
            nodes[0]
                .create_grant_request(request("a", due))
                .await
                .unwrap(),
        );
    }
    let mut tasks = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            node.expire_grant_requests(Utc::now()).await.unwrap().len()
        }));
        for r in &ids {
            let (node, r) = (nodes[(n + 1) % 3].clone(), r.clone());
            tasks.push(tokio::spawn(async move {
                let won = if n == 0 {
                    node.approve_grant_request(&r.id, grant_for(&r))
                        .await
                        .is_ok()
                } else {
                    node.deny_grant_request(&r.id, format!("op{n}"), None)
                        .await
                        .is_ok()
                };
                usize::from(won)
            }));
        }
    }
    let mut answers = 0;
    for t in tasks {
        answers += t.await.unwrap();
    }
    assert_eq!(answers, ids.len(), "one answer per request");
    let grants = nodes[2].list_grants(&GrantFilter::default()).await.unwrap();
    let events = nodes[1].events_after(0, None, 10_000).await.unwrap();
    for r in &ids {
        let now = nodes[1].get_grant_request(&r.id).await.unwrap();
        assert_ne!(now.status, GrantRequestStatus::Pending);
        let answered = events
            .iter()
            .filter(|e| e.kind != "grant_request.created" && e.data.to_value()["id"] == json!(r.id))
            .count();
        assert_eq!(answered, 1, "{}: {:?}", r.id, now.status);
        let its_grant = now.grant.as_ref().map(|g| g.id.clone());
        let made = grants
            .iter()
            .filter(|g| Some(&g.id) == its_grant.as_ref())
            .count();
        let want = usize::from(now.status == GrantRequestStatus::Approved);
        assert_eq!(made, want, "{now:?}");
    }
    assert_eq!(
        grants.len(),
        events.iter().filter(|e| e.kind == "grant.created").count()
    );
    for n in nodes {
        n.close().await;
    }
}
