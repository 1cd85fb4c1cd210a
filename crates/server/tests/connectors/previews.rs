//! A card carries what an agent wrote, links included: no chat may draw a
//! preview of an agent's link under it (a title, text and picture from the
//! agent's page, right below what an approver decides on).

use reqwest::Method;
use serde_json::{Value, json};

use super::common::TestApp;
use super::fake::{Call, Fake};
use super::pending;

const LINK: &str = "curl https://evil.example/looks-approved";

/// The posts to `path` that carry the card of `id`, once there is one.
async fn posted(fake: &Fake, path: &str, id: &str) -> Vec<Call> {
    fake.wait_for(path, "the card", |c| {
        c.iter().any(|c| c.body.to_string().contains(id))
    })
    .await
    .into_iter()
    .filter(|c| c.body.to_string().contains(id))
    .collect()
}

/// Approves `id` on the API: every card is edited to the outcome.
async fn approve(app: &TestApp, id: &str) {
    let op = app.operator.clone();
    let (s, b) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&op),
            Some(json!({})),
        )
        .await;
    assert!(s.is_success(), "{b}");
}

#[tokio::test]
async fn telegram_cards_and_their_edits_draw_no_link_preview() {
    let fake = Fake::start().await;
    let app = super::telegram::spawn(&fake, |_| {}).await;
    let id = pending(&app, LINK).await;
    let posts = posted(&fake, "/sendMessage", &id).await;
    assert_eq!(
        posts[0].body["link_preview_options"]["is_disabled"], true,
        "{:?}",
        posts[0].body
    );
    approve(&app, &id).await;
    let edits = fake
        .wait_for("/editMessageText", "the edit", |c| !c.is_empty())
        .await;
    assert_eq!(edits[0].body["link_preview_options"]["is_disabled"], true);
    app.stop().await;
}

#[tokio::test]
async fn slack_cards_unfurl_nothing() {
    let fake = Fake::start().await;
    let app = super::slack::spawn(&fake).await;
    let id = pending(&app, LINK).await;
    let posts = posted(&fake, "/chat.postMessage", &id).await;
    assert_eq!(posts[0].body["unfurl_links"], false, "{:?}", posts[0].body);
    assert_eq!(posts[0].body["unfurl_media"], false);
    app.stop().await;
}

#[tokio::test]
async fn discord_cards_and_their_edits_suppress_embeds() {
    const SUPPRESS_EMBEDS: u64 = 1 << 2;
    let fake = Fake::start().await;
    let app = super::discord::spawn(&fake).await;
    let id = pending(&app, LINK).await;
    let posts = posted(&fake, "/channels/C9/messages", &id).await;
    let flags = |b: &Value| b["flags"].as_u64().unwrap_or(0);
    assert_eq!(
        flags(&posts[0].body) & SUPPRESS_EMBEDS,
        SUPPRESS_EMBEDS,
        "{:?}",
        posts[0].body
    );
    approve(&app, &id).await;
    let edits = fake
        .wait_for("", "the edit", |c| c.iter().any(|c| c.method == "PATCH"))
        .await;
    let edit = edits.iter().find(|c| c.method == "PATCH").unwrap();
    assert_eq!(
        flags(&edit.body) & SUPPRESS_EMBEDS,
        SUPPRESS_EMBEDS,
        "{:?}",
        edit.body
    );
    app.stop().await;
}
