//! Signed audit anchors, on both backends.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use actiongate_store::anchor::{ANCHOR_EVENT, AuditKey};
use actiongate_store::audit::{GENESIS_HASH, audit_line};
use actiongate_store::audit_verify::{VerifyOptions, end_line, verify};
use actiongate_store::*;
use chrono::Utc;

use crate::backends::{Kind, open};

pub fn ask(agent: &str) -> NewAction {
    let decision = Decision {
        result: DecisionResult::Ask,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        deadline: Some(Utc::now() + chrono::Duration::minutes(5)),
        request_hash: "h".to_owned(),
        ..NewAction::new(
            agent.to_owned(),
            "bash".to_owned(),
            "make".to_owned(),
            decision,
        )
    }
}

/// Every stored event, oldest first.
pub async fn all_events(store: &Store) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    loop {
        let after = out.last().map_or(0, |e| e.seq);
        let page = store.events_after(after, None, 1000).await.unwrap();
        if page.is_empty() {
            return out;
        }
        out.extend(page);
    }
}

/// The export of `events` after `from`, checked with `key`.
pub fn verify_chain(
    events: &[Event],
    from: &audit::Anchor,
    key: &AuditKey,
) -> audit_verify::Report {
    let mut prev = from.hash.clone();
    let mut lines = Vec::new();
    let mut last = from.clone();
    for ev in events {
        let (line, hash) = audit_line(ev, &prev).unwrap();
        lines.push(Ok(line));
        last = audit::Anchor {
            seq: ev.seq,
            hash: hash.clone(),
        };
        prev = hash;
    }
    lines.push(Ok(end_line(events.len(), &last, Some(key))));
    let opts = VerifyOptions {
        from: (from.hash != GENESIS_HASH).then(|| from.clone()),
        key: Some(key.clone()),
    };
    verify(lines, &opts).unwrap_or_else(|(line, e)| panic!("line {line}: {e}"))
}

/// Waits up to 10 s for `n` anchor events.
async fn anchors(store: &Store, n: usize) -> Vec<Event> {
    for _ in 0..200 {
        let events = all_events(store).await;
        if events.iter().filter(|e| e.kind == ANCHOR_EVENT).count() >= n {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} anchors after 10 s");
}

async fn anchors_sign_the_chain_and_none_is_written_while_nothing_happens(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let key = AuditKey::load_or_create(&dir.path().join("audit.key")).unwrap();
    for _ in 0..3 {
        store.insert_action(ask("a")).await.unwrap();
    }
    store
        .start_anchors(key.clone(), Duration::from_millis(50))
        .await;
    let events = anchors(&store, 1).await;
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[3].kind, ANCHOR_EVENT);
    // Nothing written: no second anchor over the first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(all_events(&store).await.len(), 4);
    store.insert_action(ask("a")).await.unwrap();
    let events = anchors(&store, 2).await;
    assert_eq!(events.len(), 6, "{events:?}");
    let report = verify_chain(&events, &audit::Anchor::default(), &key);
    assert_eq!(report.anchors_signed, 2);
    // An anchor made with another key is refused.
    let other = AuditKey::load_or_create(&dir.path().join("other.key")).unwrap();
    let mut lines: Vec<std::io::Result<String>> = Vec::new();
    let mut prev = GENESIS_HASH.to_owned();
    for ev in &events {
        let (line, hash) = audit_line(ev, &prev).unwrap();
        lines.push(Ok(line));
        prev = hash;
    }
    let opts = VerifyOptions {
        from: None,
        key: Some(other),
    };
    assert!(verify(lines, &opts).is_err());
    store.close().await;
}

crate::conformance!(anchors_sign_the_chain_and_none_is_written_while_nothing_happens);
