//! Black-box tests: what the operator sees is what runs. An action string
//! with a line break (a command separator to a shell), a carriage return
//! and a bidi override is shown with its line break kept and marked `⏎`,
//! and the hidden characters made visible (`␍`, `⟨U+202E⟩`), and a
//! Cyrillic letter in a Latin word named (`⟨Cyrillic о⟩`), and a word of
//! Cyrillic letters drawn like Latin ones (`⟨Cyrillic ѕѕһ⟩`): in the CLI's
//! `pending` and `show`, and in a chat message (Slack, against a local
//! fake of its Web API). The web page's rendering is checked by the
//! browser test (`.ci/web-tests`, "a two-line command shows on two lines").
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common;
use common::daemon::{Daemon, agent_key, request_action, role_key, status_json};
use common::raw_http::{After, RawServer, answer};
use common::{binary, client};

/// A program named in Cyrillic letters that all look like Latin ones
/// (`ѕѕһ` is not `ssh`), a line feed, then what really runs (on a path
/// with a Cyrillic `о` that passes for a Latin one); a carriage return and
/// a right-to-left override that would make `rm` read `mr`.
const DETAIL: &str = "\u{455}\u{455}\u{4bb}\nrm -rf ~/pr\u{43e}\r\u{202e}mr";

/// `text` shows the line break as `⏎` (followed by a real break where it
/// has room for lines: `multi_line`), and every hidden character.
fn assert_visible(what: &str, text: &str, multi_line: bool) {
    // A chat card draws each line of agent text left to right (LTR isolate
    // and override marks around it) and begins each further one with `│ `.
    let text = &text
        .replace(['\u{2066}', '\u{202d}', '\u{202c}', '\u{2069}'], "")
        .replace("\n│ ", "\n");
    let mark = if multi_line {
        ":⟨Cyrillic \u{455}\u{455}\u{4bb}⟩⏎\n"
    } else {
        ":⟨Cyrillic \u{455}\u{455}\u{4bb}⟩⏎rm"
    };
    assert!(
        text.contains(mark) && text.contains("rm -rf ~/pr⟨Cyrillic \u{43e}⟩␍"),
        "{what}: the line break is not shown as one:\n{text}"
    );
    assert!(text.contains("⟨U+202E⟩mr"), "{what}:\n{text}");
    assert!(
        !text.contains('\u{202e}') && !text.contains('\r'),
        "{what}: a hidden character reached the output:\n{text}"
    );
}

fn cli(base: &str, key: &str, args: &[&str]) -> String {
    let out = Command::new(binary("actiongate"))
        .args(args)
        .env("ACTIONGATE_URL", base)
        .env("ACTIONGATE_KEY", key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_a_chat_message_show_line_breaks_and_hidden_characters() {
    // Slack's Web API, played locally: every call succeeds.
    let slack = RawServer::start(|_, _| {
        (
            answer(
                "200 OK",
                &[("content-type", "application/json")],
                r#"{"ok":true,"ts":"1700000000.000100","channel":"C1"}"#,
            ),
            After::Close,
        )
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("ACTIONGATE_CONNECTORS__SLACK__TOKEN", "xoxb-test"),
        ("ACTIONGATE_CONNECTORS__SLACK__CHANNEL", "C1"),
        (
            "ACTIONGATE_CONNECTORS__SLACK__SIGNING_SECRET",
            "test-signing-secret",
        ),
        (
            "ACTIONGATE_CONNECTORS__SLACK__API_BASE",
            slack.base.as_str(),
        ),
    ];
    let d = Daemon::start(dir.path(), &env);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let (s, _, a) = status_json(request_action(&http, &d.base, &agent, "bash", DETAIL).await).await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let id = a["id"].as_str().unwrap().to_owned();

    // The CLI.
    // A table row keeps to one line; `show` has room for lines.
    let table = cli(&d.base, &operator, &["pending"]);
    assert_visible("actiongate pending", &table, false);
    assert_visible(
        "actiongate show",
        &cli(&d.base, &operator, &["show", &id]),
        true,
    );

    // The chat message.
    let deadline = Instant::now() + Duration::from_secs(20);
    let posted = loop {
        let found = slack
            .requests()
            .into_iter()
            .find(|r| r.head.contains("chat.postMessage"));
        if let Some(r) = found {
            break r.json();
        }
        assert!(
            Instant::now() < deadline,
            "no chat message was posted; log: {:?}",
            d.stderr_lines()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let text = posted["blocks"][0]["text"]["text"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{posted}"));
    assert_visible("the Slack message", &text, true);
    let fallback = posted["text"].as_str().unwrap_or_default();
    assert!(
        !fallback.contains('\u{202e}'),
        "the message's plain text: {posted:?}"
    );
    d.stop();
}

/// Secrets inside a command (shapes from
/// `crates/policy/tests/secret_shapes.json`) are masked in the chat
/// message: no raw secret anywhere in what is posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_message_masks_secrets_in_the_command() {
    let cases: Vec<(String, String)> =
        serde_json::from_str(include_str!("../../crates/policy/tests/secret_shapes.json")).unwrap();
    // Only the cases that mask something, as one command line.
    // Cases that mask something (a token, `-u user:pass`, a header), as
    // one command line short enough for a card to show whole.
    let masking: Vec<&(String, String)> = cases
        .iter()
        .filter(|(i, o)| {
            i != o
                && (i.starts_with("curl -u sk_live")
                    || i.starts_with("curl -H 'Authorization: Bearer")
                    || i.starts_with("curl -u alice:s3cr3t-pass"))
        })
        .collect();
    assert_eq!(masking.len(), 3);
    let detail = masking
        .iter()
        .map(|(i, _)| i.as_str())
        .collect::<Vec<_>>()
        .join(" ; ");
    let posted = slack_card_of(&detail).await;
    let all = posted.to_string();
    for secret in [
        "4eC39HqLyjWDarjtT1zdp7dc",
        "hunter2",
        "s3cr3t-pass",
        "abc.def.ghi-123",
        "IOSFODNN7EXAMPLE",
        "abcdefghijklmnopqrstuvwxyz0123",
    ] {
        assert!(
            !all.contains(secret),
            "{secret} reached the chat message: {all}"
        );
    }
    let text = posted["blocks"][0]["text"]["text"]
        .as_str()
        .unwrap_or_default();
    let want = masking
        .iter()
        .map(|(_, o)| o.as_str())
        .collect::<Vec<_>>()
        .join(" ; ");
    assert!(text.contains(&want), "{text}");
}

/// The Slack message posted for a pending `bash` action of `detail`.
async fn slack_card_of(detail: &str) -> serde_json::Value {
    let slack = RawServer::start(|_, _| {
        (
            answer(
                "200 OK",
                &[("content-type", "application/json")],
                r#"{"ok":true,"ts":"1700000000.000100","channel":"C1"}"#,
            ),
            After::Close,
        )
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("ACTIONGATE_CONNECTORS__SLACK__TOKEN", "xoxb-test"),
        ("ACTIONGATE_CONNECTORS__SLACK__CHANNEL", "C1"),
        (
            "ACTIONGATE_CONNECTORS__SLACK__SIGNING_SECRET",
            "test-signing-secret",
        ),
        (
            "ACTIONGATE_CONNECTORS__SLACK__API_BASE",
            slack.base.as_str(),
        ),
    ];
    let d = Daemon::start(dir.path(), &env);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (s, _, a) = status_json(request_action(&http, &d.base, &agent, "bash", detail).await).await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let posted = loop {
        let found = slack
            .requests()
            .into_iter()
            .find(|r| r.head.contains("chat.postMessage"));
        if let Some(r) = found {
            break r.json();
        }
        assert!(
            Instant::now() < deadline,
            "no chat message was posted; log: {:?}",
            d.stderr_lines()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    d.stop();
    posted
}

/// A value in a credential's place that a shell would not take literally
/// (a command substitution, a pipe, a glob) is shown whole on the card:
/// a mask must never hide what would run once an approver taps Approve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_message_never_masks_what_a_shell_would_run() {
    let cases: Vec<(String, String)> =
        serde_json::from_str(include_str!("../../crates/policy/tests/secret_shapes.json")).unwrap();
    let hidden = cases
        .iter()
        .find(|(i, _)| i.contains("evil.example"))
        .map(|(i, _)| i.clone())
        .unwrap();
    let posted = slack_card_of(&hidden).await;
    let text = posted["blocks"][0]["text"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("evil.example/x|sh)"),
        "the substitution is not shown: {text}"
    );
    assert!(!posted.to_string().contains("••••"), "{posted}");
}
