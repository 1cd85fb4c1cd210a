//! What the chat connectors keep, on both backends: posted and edited
//! once, message ids, state and interaction ids kept across a restart.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use actiongate_store::time::{from_ms, now, to_ms};

use crate::backends::{Kind, open, reopen};

/// Posted once per item and chat, edited once, the message id kept
/// and found again, retries scheduled, interaction ids seen once, and
/// all of it still there after the store is opened again.
async fn the_chat_outbox_posts_and_edits_once_and_survives_a_reopen(kind: Kind) {
    let Some((store, held)) = open(kind).await else {
        return;
    };
    assert!(
        store
            .connector_post("telegram", "a1", "{}".into())
            .await
            .unwrap()
    );
    assert!(
        !store
            .connector_post("telegram", "a1", "{}".into())
            .await
            .unwrap()
    );
    assert!(
        store
            .connector_post("slack", "a1", "{}".into())
            .await
            .unwrap()
    );
    assert_eq!(
        store.connector_open_chats("a1").await.unwrap(),
        ["slack", "telegram"]
    );
    let due = store.connector_due(now(), 10).await.unwrap();
    assert_eq!(due.len(), 2);
    assert_eq!(due[0].kind, "post");
    store
        .connector_sent(due[0].id, Some("100".into()))
        .await
        .unwrap();
    let later = now() + chrono::Duration::seconds(60);
    store
        .connector_retry(due[1].id, later, "down".into())
        .await
        .unwrap();
    assert!(store.connector_due(now(), 10).await.unwrap().is_empty());
    assert_eq!(
        store.connector_next_due().await.unwrap(),
        Some(from_ms(to_ms(later)))
    );
    assert!(
        store
            .connector_edit("telegram", "a1", "{}".into())
            .await
            .unwrap()
    );
    assert!(
        !store
            .connector_edit("telegram", "a1", "{}".into())
            .await
            .unwrap()
    );
    assert!(
        !store
            .connector_edit("discord", "a1", "{}".into())
            .await
            .unwrap()
    );
    assert_eq!(store.connector_open_chats("a1").await.unwrap(), ["slack"]);
    store
        .set_connector_state("telegram", "offset", "7".into())
        .await
        .unwrap();
    assert!(
        store
            .connector_first_seen("telegram", "cq:1")
            .await
            .unwrap()
    );
    assert!(
        !store
            .connector_first_seen("telegram", "cq:1")
            .await
            .unwrap()
    );
    store.close().await;

    let store = reopen(&held).await;
    assert_eq!(
        store
            .connector_message_ref("telegram", "a1")
            .await
            .unwrap()
            .as_deref(),
        Some("100")
    );
    assert_eq!(
        store
            .connector_item_of("telegram", "100")
            .await
            .unwrap()
            .as_deref(),
        Some("a1")
    );
    assert_eq!(
        store
            .connector_state("telegram", "offset")
            .await
            .unwrap()
            .as_deref(),
        Some("7")
    );
    assert!(
        !store
            .connector_first_seen("telegram", "cq:1")
            .await
            .unwrap()
    );
    let due = store.connector_due(later, 10).await.unwrap();
    assert_eq!(due.len(), 2, "the retried post and the edit wait: {due:?}");
    assert_eq!(due[0].attempts, 1);
    store.close().await;
}

/// The limit is per chat: three due in one chat never hide the one due in
/// another.
async fn due_messages_are_limited_per_chat(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    for item in ["a1", "a2", "a3"] {
        assert!(
            store
                .connector_post("telegram", item, "{}".into())
                .await
                .unwrap()
        );
    }
    assert!(
        store
            .connector_post("slack", "a3", "{}".into())
            .await
            .unwrap()
    );
    let due = store.connector_due(now(), 2).await.unwrap();
    let got: Vec<(&str, &str)> = due
        .iter()
        .map(|o| (o.chat.as_str(), o.item.as_str()))
        .collect();
    assert_eq!(
        got,
        [("telegram", "a1"), ("telegram", "a2"), ("slack", "a3")]
    );
}

/// An update of an item's message is queued while its outcome is not,
/// once per distinct update, leaves the message open to its outcome edit,
/// and is never queued for a chat without its message.
async fn an_update_is_queued_only_while_the_outcome_is_not(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    assert!(
        !store
            .connector_update("slack", "a1", "{}".into())
            .await
            .unwrap()
    );
    assert!(
        store
            .connector_post("slack", "a1", "{}".into())
            .await
            .unwrap()
    );
    for body in ["{\"n\":1}", "{\"n\":2}"] {
        assert!(
            store
                .connector_update("slack", "a1", body.into())
                .await
                .unwrap()
        );
    }
    // The same update again (another daemon's of the same event) is not
    // queued twice.
    assert!(
        !store
            .connector_update("slack", "a1", "{\"n\":2}".into())
            .await
            .unwrap()
    );
    let due = store.connector_due(now(), 10).await.unwrap();
    let kinds: Vec<(&str, &str)> = due
        .iter()
        .map(|o| (o.kind.as_str(), o.body.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("post", "{}"), ("edit", "{\"n\":1}"), ("edit", "{\"n\":2}")]
    );
    assert_eq!(store.connector_open_chats("a1").await.unwrap(), ["slack"]);
    assert!(
        store
            .connector_edit("slack", "a1", "{}".into())
            .await
            .unwrap()
    );
    assert!(
        !store
            .connector_update("slack", "a1", "{}".into())
            .await
            .unwrap()
    );
}

/// The same update queued by several daemons at once (each heard the same
/// event) is queued once.
async fn the_same_update_queued_at_once_is_queued_once(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    assert!(
        store
            .connector_post("slack", "a1", "{}".into())
            .await
            .unwrap()
    );
    for round in 0..5 {
        let body = format!("{{\"round\":{round}}}");
        let queued = futures::future::join_all(
            (0..8).map(|_| store.connector_update("slack", "a1", body.clone())),
        )
        .await;
        let queued = queued
            .into_iter()
            .map(Result::unwrap)
            .filter(|q| *q)
            .count();
        assert_eq!(queued, 1, "round {round}");
    }
    let due = store.connector_due(now(), 100).await.unwrap();
    let edits = due.iter().filter(|o| o.kind == "edit").count();
    assert_eq!(edits, 5, "{due:?}");
}

crate::conformance!(
    the_chat_outbox_posts_and_edits_once_and_survives_a_reopen,
    due_messages_are_limited_per_chat,
    an_update_is_queued_only_while_the_outcome_is_not,
    the_same_update_queued_at_once_is_queued_once,
);
