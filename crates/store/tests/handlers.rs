//! Handlers and their secrets on both backends.

use actiongate_store::*;
use chrono::Utc;
use serde_json::json;

use crate::backends::{Kind, open};

fn handler(id: &str, url: &str) -> NewHandler {
    NewHandler {
        id: id.to_owned(),
        name: format!("{id} handler"),
        description: Some("does things".to_owned()),
        url: url.to_owned(),
        timeout_ms: Some(1500),
        spec: json!({"permissions": [], "actions": [{"name": "go"}]}),
    }
}

async fn handlers_are_registered_once_replaced_and_retired(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let created = store
        .create_handler(handler("fs", "http://127.0.0.1:1/a"), "whsec_one".into())
        .await
        .unwrap();
    assert_eq!(created.url, "http://127.0.0.1:1/a");
    assert_eq!(created.timeout_ms, Some(1500));
    assert_eq!(created.spec["actions"][0]["name"], "go");
    assert_eq!(created.retired_at, None);
    assert_eq!(store.get_handler("fs").await.unwrap(), created);
    let again = store
        .create_handler(handler("fs", "http://x"), "whsec_two".into())
        .await;
    assert!(
        matches!(&again, Err(StoreError::Conflict(m)) if m.contains("'fs' already exists")),
        "{again:?}"
    );

    let replaced = store
        .replace_handler(NewHandler {
            timeout_ms: None,
            ..handler("fs", "http://127.0.0.1:1/b")
        })
        .await
        .unwrap();
    assert_eq!(replaced.url, "http://127.0.0.1:1/b");
    assert_eq!(replaced.timeout_ms, None);
    assert_eq!(replaced.created_at, created.created_at);
    assert_eq!(
        store.handler_secret("fs").await.unwrap(),
        "whsec_one",
        "a replacement keeps the secret"
    );
    assert!(matches!(
        store.replace_handler(handler("nope", "http://x")).await,
        Err(StoreError::NotFound)
    ));

    store
        .create_handler(handler("db", "http://127.0.0.1:1/db"), "whsec_db".into())
        .await
        .unwrap();
    let retired = store.retire_handler("fs").await.unwrap();
    let at = retired.retired_at.expect("retired");
    let twice = store.retire_handler("fs").await.unwrap();
    assert_eq!(twice.retired_at, Some(at), "the first retirement stands");
    assert!(matches!(
        store.retire_handler("nope").await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.replace_handler(handler("fs", "http://x")).await,
        Err(StoreError::NotFound)
    ));
    // Its id stays taken: its history names it.
    assert!(matches!(
        store
            .create_handler(handler("fs", "http://x"), "whsec_3".into())
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.get_handler("fs").await.unwrap().retired_at, Some(at));
    let ids = |hs: Vec<HandlerRecord>| hs.into_iter().map(|h| h.id).collect::<Vec<_>>();
    assert_eq!(ids(store.list_handlers(false).await.unwrap()), ["db"]);
    assert_eq!(ids(store.list_handlers(true).await.unwrap()), ["db", "fs"]);
    // Pages by id: after the last id of the previous page, at most `limit`.
    let page = |after: Option<&str>, limit| Page {
        after: after.map(str::to_owned),
        limit,
        oldest_first: false,
    };
    let paged = store.handlers_page(true, &page(None, 1)).await.unwrap();
    assert_eq!(ids(paged), ["db"]);
    let paged = store.handlers_page(true, &page(Some("db"), 5)).await;
    assert_eq!(ids(paged.unwrap()), ["fs"]);
    let paged = store.handlers_page(false, &page(Some("db"), 5)).await;
    assert!(paged.unwrap().is_empty());
    assert!(matches!(
        store.get_handler("nope").await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.handler_secret("nope").await,
        Err(StoreError::NotFound)
    ));
}

async fn a_rotated_secret_stays_valid_for_its_grace_period(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    store
        .create_handler(handler("fs", "http://x"), "whsec_one".into())
        .await
        .unwrap();
    assert_eq!(store.handler_secrets("fs").await.unwrap(), ["whsec_one"]);
    let set = store.handler_secret_set("fs").await.unwrap();
    assert_eq!(set.current, "whsec_one");
    assert_eq!(set.previous, None);

    let grace = Utc::now() + chrono::Duration::minutes(10);
    store
        .rotate_handler_secret("fs", "whsec_two".into(), grace)
        .await
        .unwrap();
    assert_eq!(
        store.handler_secrets("fs").await.unwrap(),
        ["whsec_two", "whsec_one"],
        "the current one first"
    );
    assert_eq!(store.handler_secret("fs").await.unwrap(), "whsec_two");
    let set = store.handler_secret_set("fs").await.unwrap();
    let (previous, until) = set.previous.expect("the previous secret");
    assert_eq!(previous, "whsec_one");
    assert_eq!(until.timestamp_millis(), grace.timestamp_millis());

    // Rotating again with no grace: only the newest is valid.
    store
        .rotate_handler_secret("fs", "whsec_three".into(), Utc::now())
        .await
        .unwrap();
    assert_eq!(store.handler_secrets("fs").await.unwrap(), ["whsec_three"]);
    assert_eq!(
        store
            .handler_secret_set("fs")
            .await
            .unwrap()
            .previous
            .map(|p| p.0),
        Some("whsec_two".to_owned())
    );

    store.retire_handler("fs").await.unwrap();
    assert!(matches!(
        store
            .rotate_handler_secret("fs", "whsec_4".into(), grace)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.rotate_handler_secret("nope", "s".into(), grace).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.handler_secret_set("nope").await,
        Err(StoreError::NotFound)
    ));
}

crate::conformance!(
    handlers_are_registered_once_replaced_and_retired,
    a_rotated_secret_stays_valid_for_its_grace_period,
);
