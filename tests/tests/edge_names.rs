//! Black-box tests: what a handler's registration (the executor's side of
//! the gate) may name. A handler's actions are the action strings
//! `tool:<handler id>:<action> …` and the MCP tools `<handler>__<action>`;
//! neither may be one that already stands for something else, or the rules
//! and calls meant for that other thing reach the handler instead.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::common::{call, client};

/// A registration of handler `id` with `actions` (names), at a URL that
/// nothing listens on.
fn registration(id: &str, actions: &[&str]) -> Value {
    let actions: Vec<Value> = actions
        .iter()
        .map(|a| json!({"name": a, "permission": "p", "params_schema": {"type": "object"}}))
        .collect();
    json!({
        "id": id, "name": id, "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "p", "parameters_schema": {"type": "object"}}],
        "actions": actions,
    })
}

/// A handler id that is the action tool of the MCP proxy's calls
/// (`mcp__<server>__<tool>`), of its resource reads and prompts
/// (`mcp-resource`, `mcp-prompt`), or of a hook's MCP call whose name is
/// not plain (`mcp`), would get the rules written for those: with
/// `docs/mcp.md`'s own example rule allowing `tool:mcp__fs__read_file:.*`,
/// the handler `mcp__fs__read_file` had every action of its own allowed
/// and sent to its executor. Such ids are refused, like `mcp-pin`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_cannot_take_the_action_tool_of_an_mcp_call() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let profile = json!({
        "allow": ["tool:mcp__fs__read_file:.*", "tool:mcp-resource:fs .*",
                  "tool:mcp-prompt:fs .*", "tool:mcp:fs__read_file .*"],
        "ask": [],
    });
    set_profile(&http, &d.base, &admin, "bot", profile).await;
    for (id, action) in [
        ("mcp__fs__read_file", "wipe"),
        ("mcp-resource", "fs"),
        ("mcp-prompt", "fs"),
        ("mcp", "fs__read_file"),
    ] {
        let (s, b) = call(
            &http,
            Method::POST,
            format!("{}/v1/handlers", d.base),
            &admin,
            Some(registration(id, &[action])),
        )
        .await;
        if s == 201 {
            let (_, a) = call(
                &http,
                Method::POST,
                format!("{}/v1/actions", d.base),
                &agent,
                Some(json!({"handler": id, "action": action, "params": {}})),
            )
            .await;
            panic!(
                "handler '{id}' was registered; its action '{action}' is decided by the MCP \
                 rules: {}",
                a["status"]
            );
        }
        assert_eq!(s, 422, "{id}: {b}");
        assert!(b.to_string().contains("id"), "{b}");
    }
    d.stop();
}
