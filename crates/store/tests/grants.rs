//! Grants on both backends: what a new grant approves, revocation,
//! listing; and on Postgres, a grant and a decision racing from two nodes.

use std::sync::Arc;

use actiongate_policy as policy;
use actiongate_store::*;
use chrono::Utc;
use serde_json::json;

use crate::backends::{Kind, open_node, open_with, pg_database};

fn ask(agent: &str, detail: &str) -> NewAction {
    let decision = Decision {
        result: DecisionResult::Ask,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        deadline: Some(Utc::now() + chrono::Duration::minutes(5)),
        ..NewAction::new(
            agent.to_owned(),
            "bash".to_owned(),
            detail.to_owned(),
            decision,
        )
    }
}

fn tool_grant(agent: Option<&str>, pattern: &str) -> NewGrant {
    NewGrant {
        session: None,
        uses: None,
        id: uuid::Uuid::now_v7().to_string(),
        agent: agent.map(str::to_owned),
        target: NewGrantTarget::Tool {
            tool: "bash".to_owned(),
            pattern: pattern.to_owned(),
            whole_line: false,
        },
        granted_by: "op".to_owned(),
        expires_at: None,
        note: Some("n".to_owned()),
    }
}

const DENY: Transition = Transition {
    from: &[ActionStatus::Pending],
    to: ActionStatus::Denied,
    decided_by: None,
    note: None,
    outcome: None,
    event: "action.denied",
};

/// Everything asks (the `guarded` preset): agents without a profile of
/// their own get it.
fn guarded() -> StoreOptions {
    StoreOptions {
        default_profile: Some(Arc::new(policy::get_preset("guarded").unwrap())),
        ..StoreOptions::default()
    }
}

async fn a_grant_approves_what_it_covers_where_the_profile_as_stored_now_lets_it(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    // `a` has no profile (the default asks); `b`'s profile, changed after
    // its action was asked, now denies it; `c`'s action is not covered.
    let (first, _) = store.insert_action(ask("a", "deploy")).await.unwrap();
    let (covered, _) = store.insert_action(ask("a", "make all")).await.unwrap();
    let (denied_now, _) = store.insert_action(ask("b", "make all")).await.unwrap();
    let (other, _) = store.insert_action(ask("c", "rm x")).await.unwrap();
    store
        .put_agent(
            "b",
            None,
            Some(json!({"allow": [], "ask": [".*"], "deny": ["tool:bash:make.*"]})),
        )
        .await
        .unwrap();
    let mut events = store.subscribe();
    let grant = tool_grant(None, "make.*");
    let first_by = ApproveFirst {
        action_id: first.id.clone(),
        decided_by: "operator:k".to_owned(),
        seen: actiongate_store::PersonSeen::of("operator:k", None),
        note: Some("ok".to_owned()),
        person: "operator:k".to_owned(),
        channel: "api".to_owned(),
        taints: false,
    };
    let created = store
        .create_grant(grant.clone(), Some(first_by))
        .await
        .unwrap();
    assert_eq!(created.grant.id, grant.id);
    assert!(created.grant.active);
    assert_eq!(created.grant.pattern.as_deref(), Some("make.*"));
    let approved_first = created.approved_first.expect("first approved");
    assert_eq!(approved_first.status, ActionStatus::Approved);
    assert_eq!(approved_first.decided_by.as_deref(), Some("operator:k"));
    assert_eq!(approved_first.decision_note.as_deref(), Some("ok"));
    let approved: Vec<&str> = created.approved.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(approved, [covered.id.as_str()]);
    let now_covered = store.get_action(&covered.id).await.unwrap();
    assert_eq!(now_covered.status, ActionStatus::Approved);
    let by_grant = format!("grant:{}", grant.id);
    assert_eq!(now_covered.decided_by.as_deref(), Some(by_grant.as_str()));
    for id in [&denied_now.id, &other.id] {
        assert_eq!(
            store.get_action(id).await.unwrap().status,
            ActionStatus::Pending
        );
    }
    // One commit: the first approval, the grant, what it approved, in a row.
    let got: Vec<_> = [
        events.recv().await.unwrap(),
        events.recv().await.unwrap(),
        events.recv().await.unwrap(),
    ]
    .into_iter()
    .collect();
    let kinds: Vec<&str> = got.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["action.approved", "grant.created", "action.approved"]
    );
    assert_eq!(got[0].action_id.as_deref(), Some(first.id.as_str()));
    assert_eq!(got[1].grant_id.as_deref(), Some(grant.id.as_str()));
    assert_eq!(got[2].action_id.as_deref(), Some(covered.id.as_str()));
    assert_eq!(got[1].seq, got[0].seq + 1);
    assert_eq!(got[2].seq, got[1].seq + 1);
    assert!(events.try_recv().is_err());
}

async fn without_a_usable_profile_a_grant_approves_nothing(kind: Kind) {
    // No default profile: nothing of an agent without its own is approved.
    let opts = StoreOptions {
        default_profile: None,
        ..StoreOptions::default()
    };
    let Some((store, _dir)) = open_with(kind, opts).await else {
        return;
    };
    let (a, _) = store.insert_action(ask("a", "make")).await.unwrap();
    let created = store
        .create_grant(tool_grant(Some("a"), "make"), None)
        .await
        .unwrap();
    assert!(created.approved.is_empty());
    assert_eq!(
        store.get_action(&a.id).await.unwrap().status,
        ActionStatus::Pending
    );
    // With its own profile, the next grant approves it.
    store
        .put_agent("a", None, Some(json!("guarded")))
        .await
        .unwrap();
    let created = store
        .create_grant(tool_grant(Some("a"), "make"), None)
        .await
        .unwrap();
    assert_eq!(created.approved.len(), 1);
}

async fn approving_first_an_action_no_longer_pending_creates_no_grant(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    let (a, _) = store.insert_action(ask("a", "make")).await.unwrap();
    store.transition(&a.id, DENY).await.unwrap();
    let grant = tool_grant(None, "make");
    let first = ApproveFirst {
        action_id: a.id.clone(),
        decided_by: "op".to_owned(),
        seen: actiongate_store::PersonSeen::of("op", None),
        note: None,
        person: "op".to_owned(),
        channel: "api".to_owned(),
        taints: false,
    };
    let lost = store.create_grant(grant.clone(), Some(first)).await;
    assert!(
        matches!(&lost, Err(StoreError::WrongState { current }) if current == "denied"),
        "{lost:?}"
    );
    assert!(matches!(
        store.get_grant(&grant.id).await,
        Err(StoreError::NotFound)
    ));
}

/// A keyed grant stored again with the same request answers the first,
/// changed nothing and approved nothing; with another request it is a
/// conflict; another operator's same key is theirs.
async fn a_keyed_grant_is_stored_once_per_operator_and_key(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    let (a, _) = store.insert_action(ask("a", "make")).await.unwrap();
    let key = |hash: &str| RequestKey {
        key: "k1".to_owned(),
        request_hash: hash.to_owned(),
    };
    let first = store
        .create_grant_once(tool_grant(None, "make"), key("h1"))
        .await
        .unwrap();
    assert!(!first.repeated);
    assert_eq!(first.approved.len(), 1);
    assert_eq!(first.approved[0].id, a.id);
    let again = store
        .create_grant_once(tool_grant(None, "make"), key("h1"))
        .await
        .unwrap();
    assert!(again.repeated);
    assert_eq!(again.grant.id, first.grant.id);
    assert!(again.approved.is_empty());
    let other = store
        .create_grant_once(tool_grant(None, "make .*"), key("h2"))
        .await;
    assert!(matches!(other, Err(StoreError::Conflict(_))), "{other:?}");
    let theirs = NewGrant {
        granted_by: "another".to_owned(),
        ..tool_grant(None, "make")
    };
    let theirs = store.create_grant_once(theirs, key("h1")).await.unwrap();
    assert!(!theirs.repeated);
    let all = store.list_grants(&GrantFilter::default()).await.unwrap();
    assert_eq!(all.len(), 2);
}

async fn grants_are_revoked_once_and_listed_by_filter(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    let mine = tool_grant(Some("a"), "make");
    let anyone = NewGrant {
        session: None,
        uses: None,
        target: NewGrantTarget::Permission {
            handler: "files".to_owned(),
            permission: "fs.write".to_owned(),
            scope: serde_json::Map::from_iter([("path".to_owned(), json!("/tmp/*"))]),
        },
        ..tool_grant(None, "unused")
    };
    let expired = NewGrant {
        session: None,
        uses: None,
        expires_at: Some(Utc::now() - chrono::Duration::seconds(1)),
        ..tool_grant(Some("a"), "ls")
    };
    for g in [&mine, &anyone, &expired] {
        store.create_grant(g.clone(), None).await.unwrap();
    }
    assert!(matches!(
        store.create_grant(mine.clone(), None).await,
        Err(StoreError::Conflict(_))
    ));
    let got = store.get_grant(&anyone.id).await.unwrap();
    assert_eq!(got.handler.as_deref(), Some("files"));
    assert_eq!(got.scope.as_ref().unwrap()["path"], "/tmp/*");
    assert!(!store.get_grant(&expired.id).await.unwrap().active);

    let ids = |gs: Vec<GrantRecord>| gs.into_iter().map(|g| g.id).collect::<Vec<String>>();
    let all = ids(store.list_grants(&GrantFilter::default()).await.unwrap());
    assert_eq!(
        all,
        [expired.id.clone(), anyone.id.clone(), mine.id.clone()],
        "newest first"
    );
    let active = GrantFilter {
        active: Some(true),
        ..GrantFilter::default()
    };
    assert_eq!(
        ids(store.list_grants(&active).await.unwrap()),
        [anyone.id.clone(), mine.id.clone()]
    );
    let by_handler = GrantFilter {
        handler: Some("files".to_owned()),
        ..GrantFilter::default()
    };
    assert_eq!(
        ids(store.list_grants(&by_handler).await.unwrap()),
        std::slice::from_ref(&anyone.id)
    );
    // Active grants that apply: an agent's own and any agent's, by tool
    // name or handler id; never an expired one.
    let a_bash = store.active_grants("a", "bash").await.unwrap();
    assert_eq!(
        a_bash.iter().map(|g| g.id.clone()).collect::<Vec<_>>(),
        std::slice::from_ref(&mine.id)
    );
    assert_eq!(store.active_grants("z", "files").await.unwrap().len(), 1);

    let mut events = store.subscribe();
    let revoked = store.revoke_grant(&mine.id).await.unwrap();
    assert!(revoked.revoked_at.is_some() && !revoked.active);
    let again = store.revoke_grant(&mine.id).await.unwrap();
    assert_eq!(again.revoked_at, revoked.revoked_at, "unchanged");
    let ev = events.recv().await.unwrap();
    assert_eq!(ev.kind, "grant.revoked");
    assert!(events.try_recv().is_err(), "one event for two revokes");
    assert!(store.active_grants("a", "bash").await.unwrap().is_empty());
    let inactive = GrantFilter {
        active: Some(false),
        ..GrantFilter::default()
    };
    assert_eq!(
        ids(store.list_grants(&inactive).await.unwrap()),
        [expired.id.clone(), mine.id.clone()]
    );
    assert!(matches!(
        store.revoke_grant("nope").await,
        Err(StoreError::NotFound)
    ));
}

/// A grant leaves pending what an approvals rule governs: a rule of the
/// agent's profile as stored now, or one the action was asked under (kept
/// in its recorded decision by the gate) that the profile has no more.
async fn a_grant_leaves_pending_what_an_approvals_rule_governs(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    store
        .put_agent(
            "a",
            None,
            Some(json!({"allow": [], "ask": [".*"],
                "approvals": [{"pattern": "tool:bash:deploy.*", "count": 2}]})),
        )
        .await
        .unwrap();
    let (by_profile, _) = store.insert_action(ask("a", "deploy prod")).await.unwrap();
    let mut kept = ask("a", "make kept");
    kept.decision.rule = Some(json!({"kind": "pattern", "list": "ask", "index": 0,
        "pattern": ".*", "approvals": [{"pattern": "tool:bash:make.*", "count": 2, "index": 0}]}));
    let (by_copy, _) = store.insert_action(kept).await.unwrap();
    let (plain, _) = store.insert_action(ask("a", "make plain")).await.unwrap();
    let created = store
        .create_grant(tool_grant(Some("a"), ".*"), None)
        .await
        .unwrap();
    let approved: Vec<&str> = created.approved.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(approved, [plain.id.as_str()]);
    for id in [&by_profile.id, &by_copy.id] {
        assert_eq!(
            store.get_action(id).await.unwrap().status,
            ActionStatus::Pending
        );
    }
}

/// A grant stored between a decision (which read no grant, so it asks)
/// and that action's insert, on one store: the action is approved by the
/// grant as it is stored, not left pending for a human who already said
/// yes (race review: SQLite left it pending).
async fn an_ask_stored_after_a_grant_it_did_not_see_is_approved_on_every_backend(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    let grant = tool_grant(None, "make.*");
    let created = store.create_grant(grant.clone(), None).await.unwrap();
    assert!(created.approved.is_empty());
    let (action, created) = store.insert_action(ask("a", "make all")).await.unwrap();
    assert!(created);
    assert_eq!(action.status, ActionStatus::Approved);
    let by_grant = format!("grant:{}", grant.id);
    assert_eq!(action.decided_by.as_deref(), Some(by_grant.as_str()));
    assert_eq!(store.get_action(&action.id).await.unwrap(), action);
    let kinds: Vec<String> = store
        .action_events(&action.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["action.enqueued", "action.approved"]);
    // What the grant does not cover stays for a human.
    let (other, _) = store.insert_action(ask("a", "rm x")).await.unwrap();
    assert_eq!(other.status, ActionStatus::Pending);
}

/// An action asked with a caution (its caller cannot vouch for it; the
/// gate records `decision.rule` of kind `caution`) is an operator's to
/// approve: neither a grant made before it was stored nor one made while
/// it waits settles it (diff review: SQLite's late look did).
async fn a_cautioned_action_is_settled_by_no_grant(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    let cautioned = |detail: &str| {
        let mut a = ask("a", detail);
        a.decision.rule = Some(json!({"kind": "caution"}));
        a
    };
    store
        .create_grant(tool_grant(None, "make all"), None)
        .await
        .unwrap();
    let (before, _) = store.insert_action(cautioned("make all")).await.unwrap();
    assert_eq!(before.status, ActionStatus::Pending);
    let (waiting, _) = store.insert_action(cautioned("make docs")).await.unwrap();
    let created = store
        .create_grant(tool_grant(None, "make docs"), None)
        .await
        .unwrap();
    assert!(created.approved.is_empty(), "{:?}", created.approved);
    for id in [&before.id, &waiting.id] {
        assert_eq!(
            store.get_action(id).await.unwrap().status,
            ActionStatus::Pending
        );
    }
}

/// Every pending action (up to 2,000).
async fn pending(store: &Store) -> Vec<Action> {
    store
        .list_actions(&ActionFilter {
            status: Some(ActionStatus::Pending),
            limit: 2000,
            ..ActionFilter::default()
        })
        .await
        .unwrap()
}

/// A grant made while actions it covers are being asked leaves none of them
/// pending, whichever side they were stored on of the look through pending
/// actions that is made before the grant's write (`grant_scan`): before it,
/// between it and the write, or after the write.
async fn a_grant_made_while_covered_actions_are_asked_leaves_none_pending(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    // A look long enough for asks to land in.
    for i in 0..300 {
        store
            .insert_action(ask("a", &format!("make before-{i}")))
            .await
            .unwrap();
    }
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let askers: Vec<_> = (0..4)
        .map(|t| {
            let (store, asked) = (store.clone(), asked.clone());
            tokio::spawn(async move {
                for i in 0..300 {
                    store
                        .insert_action(ask("b", &format!("make during-{t}-{i}")))
                        .await
                        .unwrap();
                    asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
        })
        .collect();
    while asked.load(std::sync::atomic::Ordering::SeqCst) < 40 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let created = store
        .create_grant(tool_grant(None, "make.*"), None)
        .await
        .unwrap();
    let during = asked.load(std::sync::atomic::Ordering::SeqCst);
    for a in askers {
        a.await.unwrap();
    }
    assert!(
        during < 600,
        "every ask was over before the grant: {during}"
    );
    assert!(created.approved.len() > 300, "{}", created.approved.len());
    let pending = pending(&store).await;
    let details: Vec<&str> = pending.iter().map(|a| a.detail.as_str()).collect();
    assert!(
        details.is_empty(),
        "{} left pending: {details:?}",
        details.len()
    );
}

/// The look before a grant reads the queue a page at a time: a grant over
/// more pending actions than a page approves every one it covers (those
/// on later pages too) and nothing else.
async fn a_grant_over_a_queue_longer_than_a_page_approves_all_it_covers(kind: Kind) {
    let Some((store, _dir)) = open_with(kind, guarded()).await else {
        return;
    };
    let mut covered: Vec<String> = Vec::new();
    for i in 0..1_234 {
        let (a, _) = store
            .insert_action(ask("a", &format!("make step-{i}")))
            .await
            .unwrap();
        covered.push(a.id);
        if i % 3 == 0 {
            store
                .insert_action(ask("a", &format!("rm step-{i}")))
                .await
                .unwrap();
        }
    }
    let created = store
        .create_grant(tool_grant(None, "make.*"), None)
        .await
        .unwrap();
    let approved: std::collections::HashSet<&str> =
        created.approved.iter().map(|a| a.id.as_str()).collect();
    let missed = covered
        .iter()
        .filter(|id| !approved.contains(id.as_str()))
        .count();
    assert_eq!(missed, 0, "{missed} of {} covered left out", covered.len());
    assert_eq!(approved.len(), covered.len());
    let pending = pending(&store).await;
    assert_eq!(pending.len(), 412);
    assert!(pending.iter().all(|a| a.detail.starts_with("rm ")));
}

crate::conformance!(
    a_grant_over_a_queue_longer_than_a_page_approves_all_it_covers,
    a_grant_made_while_covered_actions_are_asked_leaves_none_pending,
    a_cautioned_action_is_settled_by_no_grant,
    an_ask_stored_after_a_grant_it_did_not_see_is_approved_on_every_backend,
    a_grant_approves_what_it_covers_where_the_profile_as_stored_now_lets_it,
    a_grant_leaves_pending_what_an_approvals_rule_governs,
    without_a_usable_profile_a_grant_approves_nothing,
    approving_first_an_action_no_longer_pending_creates_no_grant,
    grants_are_revoked_once_and_listed_by_filter,
    a_keyed_grant_is_stored_once_per_operator_and_key,
);

/// Two nodes: grants covering the same actions and operators denying them
/// at once; each action is decided once, and only what the grants approved
/// carries their decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grants_and_decisions_racing_on_two_nodes_decide_each_action_once() {
    let Some(url) = pg_database() else {
        return;
    };
    let a = open_node(&url).await;
    let b = open_node(&url).await;
    a.put_agent("a", None, Some(json!("guarded")))
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..40 {
        ids.push(
            a.insert_action(ask("a", &format!("make {i}")))
                .await
                .unwrap()
                .0
                .id,
        );
    }
    let deny = |store: Store, id: String| async move { store.transition(&id, DENY).await.is_ok() };
    let grants = [
        tokio::spawn({
            let a = a.clone();
            async move { a.create_grant(tool_grant(None, "make.*"), None).await }
        }),
        tokio::spawn({
            let b = b.clone();
            async move { b.create_grant(tool_grant(Some("a"), "make.*"), None).await }
        }),
    ];
    let denials: Vec<_> = ids
        .iter()
        .rev()
        .enumerate()
        .map(|(i, id)| {
            let node = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(deny(node, id.clone()))
        })
        .collect();
    let mut by_grant = Vec::new();
    for g in grants {
        by_grant.extend(g.await.unwrap().unwrap().approved.into_iter().map(|a| a.id));
    }
    let mut denied = Vec::new();
    for (d, id) in denials.into_iter().zip(ids.iter().rev()) {
        if d.await.unwrap() {
            denied.push(id.clone());
        }
    }
    let mut decided: Vec<String> = by_grant.iter().chain(&denied).cloned().collect();
    decided.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(decided, all, "each action decided exactly once");
    for id in &ids {
        let events = b.action_events(id).await.unwrap();
        let decisions = events
            .iter()
            .filter(|e| e.kind == "action.approved" || e.kind == "action.denied")
            .count();
        assert_eq!(decisions, 1, "{id}: {events:?}");
        let action = b.get_action(id).await.unwrap();
        let want = if by_grant.contains(id) {
            ActionStatus::Approved
        } else {
            ActionStatus::Denied
        };
        assert_eq!(action.status, want);
    }
    a.close().await;
    b.close().await;
}

/// "Approve and remember" on two nodes at once, each grant covering the
/// action the other approves first: no deadlock (a 503 to an operator),
/// each action approved once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approvals_that_remember_on_two_nodes_at_once_do_not_deadlock() {
    let Some(url) = pg_database() else {
        return;
    };
    let nodes = [open_node(&url).await, open_node(&url).await];
    nodes[0]
        .put_agent("a", None, Some(json!("guarded")))
        .await
        .unwrap();
    for round in 0..5 {
        let mut ids = Vec::new();
        for i in 0..20 {
            let new = ask("a", &format!("make {round}-{i}"));
            ids.push(nodes[0].insert_action(new).await.unwrap().0.id);
        }
        let remember = |node: &Store, first: &str| {
            let (node, first) = (node.clone(), first.to_owned());
            tokio::spawn(async move {
                let grant = tool_grant(Some("a"), &format!("make {round}-.*"));
                let first = ApproveFirst {
                    action_id: first,
                    decided_by: "op".to_owned(),
                    seen: actiongate_store::PersonSeen::of("op", None),
                    note: None,
                    person: "op".to_owned(),
                    channel: "api".to_owned(),
                    taints: false,
                };
                node.create_grant(grant, Some(first)).await
            })
        };
        let answers = [remember(&nodes[0], &ids[15]), remember(&nodes[1], &ids[5])];
        let mut approved = Vec::new();
        for a in answers {
            match a.await.unwrap() {
                Ok(created) => {
                    approved.extend(created.approved_first.map(|a| a.id));
                    approved.extend(created.approved.into_iter().map(|a| a.id));
                }
                // The other grant approved this one's first action already.
                Err(StoreError::WrongState { current }) => assert_eq!(current, "approved"),
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        approved.sort();
        ids.sort();
        assert_eq!(approved, ids, "round {round}: each approved once");
    }
    for n in nodes {
        n.close().await;
    }
}

/// A grant committed on one node between another node's decision (which
/// read no grant, so it asks) and that node's insert: the new action is
/// approved by the grant in its insert's transaction, not left pending for
/// a human who already said yes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ask_stored_after_a_grant_it_did_not_see_is_approved_by_that_grant() {
    let Some(url) = pg_database() else {
        return;
    };
    let a = open_node(&url).await;
    let b = open_node(&url).await;
    a.put_agent("a", None, Some(json!("guarded")))
        .await
        .unwrap();
    a.put_agent(
        "d",
        None,
        Some(json!({"allow": [], "ask": [".*"], "deny": ["tool:bash:make.*"]})),
    )
    .await
    .unwrap();
    // Node a's decision reads the grants: none.
    assert!(a.active_grants("a", "bash").await.unwrap().is_empty());
    // Node b's grant commits: nothing pending to approve yet.
    let grant = tool_grant(None, "make.*");
    let created = b.create_grant(grant.clone(), None).await.unwrap();
    assert!(created.approved.is_empty());
    // Node a stores what it decided.
    let (action, created) = a.insert_action(ask("a", "make all")).await.unwrap();
    assert!(created);
    assert_eq!(action.status, ActionStatus::Approved);
    let by_grant = format!("grant:{}", grant.id);
    assert_eq!(action.decided_by.as_deref(), Some(by_grant.as_str()));
    assert_eq!(b.get_action(&action.id).await.unwrap(), action);
    let kinds: Vec<String> = b
        .action_events(&action.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["action.enqueued", "action.approved"]);
    // What the grant does not cover, or the profile as stored now denies,
    // stays for a human, as when a grant is made.
    for (agent, detail) in [("a", "rm x"), ("d", "make all")] {
        let (other, _) = a.insert_action(ask(agent, detail)).await.unwrap();
        assert_eq!(other.status, ActionStatus::Pending, "{agent} {detail}");
    }
    a.close().await;
    b.close().await;
}

/// New actions asking on one node while grants covering them are made on
/// another: once both are done, none of them waits for a human.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn asks_racing_a_grant_on_another_node_are_never_left_pending() {
    let Some(url) = pg_database() else {
        return;
    };
    let a = open_node(&url).await;
    let b = open_node(&url).await;
    a.put_agent("a", None, Some(json!("guarded")))
        .await
        .unwrap();
    for round in 0..5 {
        let askers: Vec<_> = (0..6)
            .map(|t| {
                let a = a.clone();
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for i in 0..8 {
                        let new = ask("a", &format!("make {round}-{t}-{i}"));
                        ids.push(a.insert_action(new).await.unwrap().0.id);
                    }
                    ids
                })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(5 + 4 * round)).await;
        let grant = tool_grant(Some("a"), &format!("make {round}-.*"));
        b.create_grant(grant, None).await.unwrap();
        for asker in askers {
            for id in asker.await.unwrap() {
                let action = b.get_action(&id).await.unwrap();
                assert_eq!(action.status, ActionStatus::Approved, "round {round}");
            }
        }
    }
    a.close().await;
    b.close().await;
}

/// Waits until `rx` has heard an event of `kind`.
async fn heard(rx: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<Event>>, kind: &str) {
    tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while rx.recv().await.unwrap().kind != kind {}
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind}"));
}

/// Each node keeps the active grants it read: a grant made or revoked on
/// this node counts at once, one made or revoked on another as soon as
/// this node has heard of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grants_made_or_revoked_on_any_node_count_once_heard() {
    let Some(url) = pg_database() else {
        return;
    };
    let a = open_node(&url).await;
    let b = open_node(&url).await;
    let mut on_a = a.subscribe();
    let ids = |g: Vec<policy::Grant>| g.into_iter().map(|g| g.id).collect::<Vec<_>>();
    for _ in 0..3 {
        assert!(a.active_grants("a", "bash").await.unwrap().is_empty());
    }
    let made = b
        .create_grant(tool_grant(None, "make.*"), None)
        .await
        .unwrap();
    heard(&mut on_a, "grant.created").await;
    assert_eq!(
        ids(a.active_grants("a", "bash").await.unwrap()),
        std::slice::from_ref(&made.grant.id)
    );
    b.revoke_grant(&made.grant.id).await.unwrap();
    heard(&mut on_a, "grant.revoked").await;
    assert!(a.active_grants("a", "bash").await.unwrap().is_empty());
    // Made and revoked here: no waiting.
    let mine = a
        .create_grant(tool_grant(Some("a"), "ls"), None)
        .await
        .unwrap();
    assert_eq!(
        ids(a.active_grants("a", "bash").await.unwrap()),
        std::slice::from_ref(&mine.grant.id)
    );
    a.revoke_grant(&mine.grant.id).await.unwrap();
    assert!(a.active_grants("a", "bash").await.unwrap().is_empty());
    a.close().await;
    b.close().await;
}
