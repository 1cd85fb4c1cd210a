//! Grant requests and plans listed page by page on both backends: a queue
//! longer than a page is read whole, oldest first (the longest waiting
//! first) or newest first, each item once and in order, whatever else
//! (settled items, other agents') lies between.

use actiongate_api::sessions::{Plan, PlanStep};
use actiongate_store::*;
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::backends::{Kind, open};

fn request(agent: &str) -> NewGrantRequest {
    NewGrantRequest {
        id: format!("grq_{}", uuid::Uuid::now_v7().simple()),
        agent: agent.to_owned(),
        handler: "files".to_owned(),
        permission: "fs.write".to_owned(),
        scope: serde_json::Map::from_iter([("path".to_owned(), json!("/a"))]),
        reason: None,
        expires: None,
        deadline: Utc::now() + chrono::Duration::hours(1),
        session: None,
        uses: None,
    }
}

/// Every id of a listing read `limit` at a time, each page
/// after the last id of the one before, until an empty page.
async fn all_pages<F, Fut>(limit: i64, oldest_first: bool, list: F) -> Vec<String>
where
    F: Fn(Page) -> Fut,
    Fut: std::future::Future<Output = Vec<String>>,
{
    let mut listed: Vec<String> = Vec::new();
    let mut page = Page {
        after: None,
        limit,
        oldest_first,
    };
    loop {
        let ids = list(page.clone()).await;
        assert!(ids.len() as i64 <= limit, "{} > {limit}", ids.len());
        let Some(last) = ids.last() else { break };
        page.after = Some(last.clone());
        listed.extend(ids);
    }
    listed
}

async fn pending_grant_requests_are_paged_oldest_first(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    // 37 requests of three agents; every fifth is denied at once.
    let mut pending = Vec::new();
    let mut of_b = Vec::new();
    for n in 0..37 {
        let agent = ["a", "b", "c"][n % 3];
        let r = store.create_grant_request(request(agent)).await.unwrap();
        if n % 5 == 4 {
            store
                .deny_grant_request(&r.id, "op".to_owned(), None)
                .await
                .unwrap();
        } else {
            pending.push(r.id.clone());
            if agent == "b" {
                of_b.push(r.id.clone());
            }
        }
    }
    let status = Some(GrantRequestStatus::Pending);
    let list = |agent: Option<&'static str>| {
        let store = store.clone();
        move |page: Page| {
            let store = store.clone();
            async move {
                let rs = store
                    .list_grant_requests(agent, status, &page)
                    .await
                    .unwrap();
                assert!(rs.iter().all(|r| r.status == GrantRequestStatus::Pending));
                rs.into_iter().map(|r| r.id).collect()
            }
        }
    };
    assert!(pending.len() > 7);
    assert_eq!(all_pages(7, true, list(None)).await, pending);
    assert_eq!(all_pages(5, true, list(Some("b"))).await, of_b);
    let mut newest = pending.clone();
    newest.reverse();
    assert_eq!(all_pages(7, false, list(None)).await, newest);
    // One page as long as the queue holds all of it; past the newest, none.
    assert_eq!(all_pages(500, true, list(None)).await, pending);
    let past_the_end = Page {
        after: pending.last().cloned(),
        limit: 10,
        oldest_first: true,
    };
    assert!(
        store
            .list_grant_requests(None, status, &past_the_end)
            .await
            .unwrap()
            .is_empty()
    );
}

fn plan(n: usize, created_at: DateTime<Utc>) -> Plan {
    Plan {
        id: format!("pln_{}", uuid::Uuid::now_v7().simple()),
        agent: "a".to_owned(),
        session: "s1".to_owned(),
        reason: Some(format!("plan {n}")),
        status: "pending".to_owned(),
        steps: vec![PlanStep {
            tool: Some("bash".to_owned()),
            detail: Some(format!("echo {n}")),
            handler: None,
            action: None,
            params: None,
            approved: false,
            grants: Vec::new(),
            asks: None,
        }],
        created_at,
        decided_at: None,
        decided_by: None,
    }
}

async fn pending_plans_are_paged_oldest_first_in_the_order_they_were_made(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    // Plans listed by when they were made, then by id: three share each
    // millisecond, and every seventh was made a second earlier than its id
    // says (another daemon's clock), so ids alone would list it elsewhere.
    let base = actiongate_store::time::from_ms(Utc::now().timestamp_millis());
    let mut made: Vec<(DateTime<Utc>, String)> = Vec::new();
    for n in 0..31 {
        let mut at = base + chrono::Duration::milliseconds((n / 3) as i64);
        if n % 7 == 6 {
            at -= chrono::Duration::seconds(1);
        }
        let p = store.create_plan(plan(n, at), None).await.unwrap().0;
        if n % 4 == 3 {
            store
                .decide_plan(p.id.clone(), "denied", "op".to_owned(), p.steps, Vec::new())
                .await
                .unwrap();
        } else {
            made.push((at, p.id));
        }
    }
    made.sort();
    let pending: Vec<String> = made.into_iter().map(|(_, id)| id).collect();
    let list = |status: Option<&'static str>| {
        let store = store.clone();
        move |page: Page| {
            let store = store.clone();
            async move {
                let ps = store
                    .list_plans(status.map(str::to_owned), &page)
                    .await
                    .unwrap();
                ps.into_iter().map(|p| p.id).collect()
            }
        }
    };
    assert!(pending.len() > 6);
    assert_eq!(all_pages(6, true, list(Some("pending"))).await, pending);
    let mut newest = pending.clone();
    newest.reverse();
    assert_eq!(all_pages(6, false, list(Some("pending"))).await, newest);
    assert_eq!(all_pages(200, true, list(Some("pending"))).await, pending);
    assert_eq!(all_pages(4, true, list(None)).await.len(), 31);
}

/// A plan asked again under its key is the first, made once; another
/// request under the key is a conflict; another agent's key is its own.
async fn a_keyed_plan_is_stored_once_per_agent_and_key(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let key = |hash: &str| RequestKey {
        key: "k1".to_owned(),
        request_hash: hash.to_owned(),
    };
    let at = Utc::now();
    let (first, created) = store
        .create_plan(plan(1, at), Some(key("h1")))
        .await
        .unwrap();
    assert!(created);
    let (again, created) = store
        .create_plan(plan(1, at), Some(key("h1")))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again.id, first.id);
    let found = store.plan_for_key("a", &key("h1")).await.unwrap();
    assert_eq!(found.map(|p| p.id), Some(first.id.clone()));
    assert!(
        store
            .plan_for_key(
                "a",
                &RequestKey {
                    key: "k2".to_owned(),
                    ..key("h1")
                }
            )
            .await
            .unwrap()
            .is_none()
    );
    let other = store.create_plan(plan(2, at), Some(key("h2"))).await;
    assert!(matches!(other, Err(StoreError::Conflict(_))), "{other:?}");
    let looked = store.plan_for_key("a", &key("h2")).await;
    assert!(matches!(looked, Err(StoreError::Conflict(_))), "{looked:?}");
    let theirs = Plan {
        agent: "b".to_owned(),
        ..plan(1, at)
    };
    let (theirs, created) = store.create_plan(theirs, Some(key("h1"))).await.unwrap();
    assert!(created);
    assert_ne!(theirs.id, first.id);
}

crate::conformance!(
    pending_grant_requests_are_paged_oldest_first,
    pending_plans_are_paged_oldest_first_in_the_order_they_were_made,
    a_keyed_plan_is_stored_once_per_agent_and_key,
);
