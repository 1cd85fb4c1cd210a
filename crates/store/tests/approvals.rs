//! Team decisions and people on both backends; on Postgres, approvals
//! racing from several nodes are counted once each and settle once.

use actiongate_api::teams::Seen;
use actiongate_store::*;
use chrono::Utc;

use crate::backends::{Kind, open, open_node, pg_database};

fn asked(agent: &str, detail: &str) -> NewAction {
    let decision = Decision {
        result: DecisionResult::Ask,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        deadline: Some(Utc::now() + chrono::Duration::minutes(5)),
        ..NewAction::new(
            agent.to_owned(),
            "deploy".to_owned(),
            detail.to_owned(),
            decision,
        )
    }
}

fn approval(who: &str, required: u32) -> TeamDecision {
    TeamDecision {
        approve: true,
        entry: ApprovalEntry {
            who: who.to_owned(),
            by: format!("key:{who}"),
            channel: "api".to_owned(),
            at: Utc::now(),
        },
        required,
        note: None,
        edit: None,
        seen: None,
        lapsed: Vec::new(),
        taints: false,
        people_seen: Vec::new(),
    }
}

/// Makes each of `names` a person whose key is `key_<name>`'s identity
/// `key:<name>` (as [`approval`] gives it): only people's approvals count
/// toward a quorum.
async fn people(store: &Store, names: &[&str]) {
    for name in names {
        let person = NewPerson {
            id: format!("per_{name}"),
            name: (*name).to_owned(),
            groups: vec![],
            keys: vec![(*name).to_owned()],
            chat: ChatIds::default(),
        };
        store.put_person(person, true).await.unwrap();
    }
}

async fn a_quorum_settles_on_the_last_approval_and_refuses_a_repeat(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    people(&store, &["ann", "bob", "cat"]).await;
    let (a, _) = store.insert_action(asked("a", "prod")).await.unwrap();
    let one = store.team_decide(&a.id, approval("ann", 2)).await.unwrap();
    assert!(!one.settled);
    assert_eq!(one.action.status, ActionStatus::Pending);
    assert_eq!(one.action.team.approvals.len(), 1);
    // Read back as stored.
    let read = store.get_action(&a.id).await.unwrap();
    assert_eq!(read.team.approvals_required, Some(2));
    match store.team_decide(&a.id, approval("ann", 2)).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("ann"), "{m}"),
        other => panic!("a repeat: {other:?}"),
    }
    // An approval of an edit nobody made is refused, and counts nothing.
    let mut phantom = approval("bob", 2);
    phantom.seen = Some(Seen::Edited);
    match store.team_decide(&a.id, phantom).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("nobody edited"), "{m}"),
        other => panic!("an approval of a phantom edit: {other:?}"),
    }
    let two = store.team_decide(&a.id, approval("bob", 2)).await.unwrap();
    assert!(two.settled);
    assert_eq!(two.action.status, ActionStatus::Approved);
    assert_eq!(two.action.decided_by.as_deref(), Some("key:bob"));
    assert_eq!(two.action.team.decided_person.as_deref(), Some("bob"));
    match store.team_decide(&a.id, approval("cat", 2)).await {
        Err(StoreError::WrongState { current }) => assert_eq!(current, "approved"),
        other => panic!("after settling: {other:?}"),
    }
    let kinds: Vec<String> = store
        .action_events(&a.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        ["action.enqueued", "action.approval", "action.approved"]
    );
    // An edit with the first approval replaces what runs; not after.
    let (b, _) = store.insert_action(asked("a", "prod eu")).await.unwrap();
    // The edit raised the count to 3 (its rule, kept below).
    let mut first = approval("ann", 3);
    let kept = serde_json::json!({"approvals": [{"pattern": "tool:deploy:prod.*", "count": 3, "index": 0}]});
    first.edit = Some(Edit {
        params: None,
        params_view: None,
        detail: Some("prod eu-west".to_owned()),
        action_string: None,
        decision_rule: Some(kept.clone()),
    });
    let edited = store.team_decide(&b.id, first).await.unwrap();
    assert!(edited.action.team.edited);
    assert_eq!(
        edited.action.team.approved_detail.as_deref(),
        Some("prod eu-west")
    );
    // The edit's rules are kept with the action's decision.
    let read = store.get_action(&b.id).await.unwrap();
    assert_eq!(read.decision.rule, Some(kept));
    let mut late = approval("bob", 2);
    late.edit = Some(Edit {
        params: None,
        params_view: None,
        detail: Some("prod".to_owned()),
        action_string: None,
        decision_rule: None,
    });
    assert!(matches!(
        store.team_decide(&b.id, late).await,
        Err(StoreError::Conflict(_))
    ));
    // An approval of the action as asked (a chat card) does not count
    // toward the edited one, nor change it.
    let mut stale = approval("cat", 3);
    stale.seen = Some(Seen::Asked);
    assert!(matches!(
        store.team_decide(&b.id, stale).await,
        Err(StoreError::Conflict(m)) if m.contains("edited")
    ));
    assert_eq!(
        store.get_action(&b.id).await.unwrap().team.approvals.len(),
        1
    );
    // A later approver reckoning fewer does not lower what the first
    // approval needed; one who read the edit approves it.
    let mut fewer = approval("bob", 1);
    fewer.seen = Some(Seen::Edited);
    let fewer = store.team_decide(&b.id, fewer).await.unwrap();
    assert!(!fewer.settled);
    assert_eq!(fewer.action.team.approvals_required, Some(3));
    // The same identity under another name (its person changed) is refused.
    let mut renamed = approval("ann-renamed", 2);
    renamed.entry.by = "key:ann".to_owned();
    assert!(matches!(
        store.team_decide(&b.id, renamed).await,
        Err(StoreError::Conflict(_))
    ));
    // Escalation happens once.
    let (c, _) = store.insert_action(asked("a", "prod us")).await.unwrap();
    assert!(store.escalate(&c.id).await.unwrap().is_some());
    assert!(store.escalate(&c.id).await.unwrap().is_none());
}

/// An earlier approval whose key was revoked, or whose person was
/// removed, after the gate worked out which approvals still count (so not
/// in `lapsed`) is dropped in the decision's own transaction: the next
/// approval does not settle the action with it.
async fn an_approval_revoked_meanwhile_is_not_counted(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    people(&store, &["fay", "bob", "cat", "dan"]).await;
    let operator = |id: &str| NewKey {
        id: id.to_owned(),
        name: id.to_owned(),
        role: Role::Operator,
        agent: None,
        hash: format!("hash-{id}"),
    };
    store.create_key(operator("fay")).await.unwrap();
    let (a, _) = store.insert_action(asked("a", "prod 1")).await.unwrap();
    let one = store.team_decide(&a.id, approval("fay", 2)).await.unwrap();
    assert!(!one.settled);
    store.revoke_key("fay").await.unwrap();
    let two = store.team_decide(&a.id, approval("bob", 2)).await.unwrap();
    assert!(!two.settled, "counted a revoked key's approval");
    assert_eq!(two.action.team.approvals.len(), 1);
    assert_eq!(two.action.team.approvals[0].who, "bob");
    // A person removed: the same.
    let (b, _) = store.insert_action(asked("a", "prod 2")).await.unwrap();
    store.team_decide(&b.id, approval("cat", 2)).await.unwrap();
    store.delete_person("per_cat").await.unwrap();
    let two = store.team_decide(&b.id, approval("dan", 2)).await.unwrap();
    assert!(!two.settled, "counted a removed person's approval");
    assert_eq!(two.action.team.approvals.len(), 1);
    // A denial is not held up by what no longer counts.
    let no = TeamDecision {
        approve: false,
        ..approval("bob", 2)
    };
    assert!(store.team_decide(&b.id, no).await.unwrap().settled);
}

async fn people_own_their_identities(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let ann = NewPerson {
        id: "per_ann".to_owned(),
        name: "ann".to_owned(),
        groups: vec!["dba".to_owned()],
        keys: vec!["key_1".to_owned()],
        chat: ChatIds {
            telegram: Some("42".to_owned()),
            ..ChatIds::default()
        },
    };
    store.put_person(ann.clone(), true).await.unwrap();
    let found = store.person_of("telegram:42").await.unwrap().unwrap();
    assert_eq!(found.name, "ann");
    assert_eq!(
        store.person_of("key:key_1").await.unwrap().unwrap().id,
        "per_ann"
    );
    let bob = NewPerson {
        id: "per_bob".to_owned(),
        name: "bob".to_owned(),
        keys: vec!["key_1".to_owned()],
        groups: vec![],
        chat: ChatIds::default(),
    };
    assert!(matches!(
        store.put_person(bob, true).await,
        Err(StoreError::Conflict(_))
    ));
    // Nothing of bob's was kept.
    assert_eq!(store.list_people().await.unwrap().len(), 1);
    store.delete_person("per_ann").await.unwrap();
    assert!(store.person_of("telegram:42").await.unwrap().is_none());
}

/// The escalation sweep's look at what was asked: the actions stored
/// pending after an event, oldest first, paged by seq; not those allowed
/// when asked.
async fn actions_asked_are_listed_after_an_event_in_pages(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let start = store.newest_seq().await.unwrap();
    let mut ids = Vec::new();
    for n in 0..5 {
        let (a, _) = store
            .insert_action(asked("a", &format!("prod {n}")))
            .await
            .unwrap();
        ids.push(a.id);
        let mut allowed = asked("a", &format!("ls {n}"));
        allowed.decision.result = DecisionResult::Allow;
        store.insert_action(allowed).await.unwrap();
    }
    // One settles: still listed (it was asked).
    store
        .team_decide(&ids[1], approval("ann", 1))
        .await
        .unwrap();
    let first = store.enqueued_after(start, 2).await.unwrap();
    let listed = |page: &[(i64, String)]| page.iter().map(|(_, id)| id.clone()).collect::<Vec<_>>();
    assert_eq!(listed(&first), ids[..2]);
    let rest = store.enqueued_after(first[1].0, 10).await.unwrap();
    assert_eq!(listed(&rest), ids[2..]);
    assert!(rest.windows(2).all(|w| w[0].0 < w[1].0), "{rest:?}");
    let none = store.enqueued_after(rest[2].0, 10).await.unwrap();
    assert!(none.is_empty(), "{none:?}");
}

/// An approval checked against a person as they were is refused when
/// they changed before its transaction (removed from the approvers'
/// group, their identity moved to someone else), and counts nothing; as
/// read, it counts. The same for "approve and remember".
async fn an_approval_checked_against_a_changed_person_is_refused(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let ann = |groups: Vec<String>| NewPerson {
        id: "per_ann".to_owned(),
        name: "ann".to_owned(),
        groups,
        keys: vec!["ann".to_owned()],
        chat: ChatIds::default(),
    };
    let was = store
        .put_person(ann(vec!["ops".to_owned()]), true)
        .await
        .unwrap();
    let seen = PersonSeen::of("key:ann", Some(&was));
    let (a, _) = store.insert_action(asked("a", "prod")).await.unwrap();
    // Removed from "ops" after the gate checked her.
    store.put_person(ann(vec![]), false).await.unwrap();
    let mut one = approval("ann", 1);
    one.people_seen = vec![seen.clone()];
    match store.team_decide(&a.id, one.clone()).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("key:ann"), "{m}"),
        other => panic!("approved under a stale membership: {other:?}"),
    }
    let read = store.get_action(&a.id).await.unwrap();
    assert_eq!(read.status, ActionStatus::Pending);
    assert!(read.team.approvals.is_empty());
    let first = ApproveFirst {
        action_id: a.id.clone(),
        decided_by: "key:ann".to_owned(),
        seen,
        note: None,
        person: "ann".to_owned(),
        channel: "api".to_owned(),
        taints: false,
    };
    let grant = NewGrant {
        id: "grt_seen".to_owned(),
        agent: Some("a".to_owned()),
        target: NewGrantTarget::Tool {
            tool: "deploy".to_owned(),
            pattern: "prod".to_owned(),
            whole_line: false,
        },
        granted_by: "key:ann".to_owned(),
        expires_at: Some(Utc::now() + chrono::Duration::minutes(5)),
        note: None,
        session: None,
        uses: None,
    };
    match store.create_grant(grant, Some(first)).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("key:ann"), "{m}"),
        other => panic!("remembered under a stale membership: {other:?}"),
    }
    assert!(
        store.get_grant("grt_seen").await.is_err(),
        "the grant was made"
    );
    // As she is now, the approval counts.
    let now = store.person_of("key:ann").await.unwrap();
    one.people_seen = vec![PersonSeen::of("key:ann", now.as_ref())];
    assert!(store.team_decide(&a.id, one).await.unwrap().settled);
}

crate::conformance!(
    an_approval_checked_against_a_changed_person_is_refused,
    a_quorum_settles_on_the_last_approval_and_refuses_a_repeat,
    people_own_their_identities,
    an_approval_revoked_meanwhile_is_not_counted,
    actions_asked_are_listed_after_an_event_in_pages,
);

/// Three nodes approve the same actions at once, each as another person,
/// for a quorum of two: two approvals count, the third finds it approved;
/// one `action.approved` each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approvals_racing_on_three_nodes_count_once_and_settle_once() {
    let Some(url) = pg_database() else {
        return;
    };
    let nodes = [
        open_node(&url).await,
        open_node(&url).await,
        open_node(&url).await,
    ];
    people(&nodes[0], &["p0", "p1", "p2"]).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let (a, _) = nodes[0]
            .insert_action(asked("a", &format!("r{i}")))
            .await
            .unwrap();
        ids.push(a.id);
    }
    let mut tasks = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let node = node.clone();
        let ids = ids.clone();
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for id in ids {
                results.push(node.team_decide(&id, approval(&format!("p{n}"), 2)).await);
            }
            results
        }));
    }
    let mut per_action = vec![(0, 0); ids.len()];
    for t in tasks {
        for (i, r) in t.await.unwrap().into_iter().enumerate() {
            match r {
                Ok(_) => per_action[i].0 += 1,
                Err(StoreError::WrongState { .. }) => per_action[i].1 += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(per_action[i], (2, 1), "{id}");
        let a = nodes[1].get_action(id).await.unwrap();
        assert_eq!(a.status, ActionStatus::Approved);
        assert_eq!(a.team.approvals.len(), 2);
        let approved = nodes[2]
            .action_events(id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == "action.approved")
            .count();
        assert_eq!(approved, 1, "{id}");
    }
}
