//! Black-box tests: what a handler's registration (the executor's side of
//! the gate) may name. A handler's actions are the action strings
//! `tool:<handler id>:<action> …` and the MCP tools `<handler>__<action>`;
//! neither may be one that already stands for something else, or the rules
//! and calls meant for that other thing reach the handler instead.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, register_handler, set_profile};
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

/// The MCP tool names of the handler actions the daemon lists.
async fn tool_names(http: &reqwest::Client, base: &str, key: &str) -> Vec<String> {
    let (s, b) = call(
        http,
        Method::GET,
        format!("{base}/v1/tools?format=mcp"),
        key,
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b["tools"]
        .as_array()
        .or(b.as_array())
        .unwrap_or_else(|| panic!("{b}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Two actions whose MCP tool names come out the same (`a` + `b__c` and
/// `a__b` + `c`; `send.email` and `send_email`; names cut at 64
/// characters) made one tool name for two actions: a call of that tool
/// went to whichever handler sorts first, with the params the agent meant
/// for the other one. A registration whose tool name is already another
/// action's is refused, and every listed tool name is one action's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_actions_never_share_one_mcp_tool_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    register_handler(&http, &d.base, &admin, registration("a__b", &["c"])).await;
    // `v`×60 + `__` + `ab_one`, cut at 64: `v`×60 + `__ab`.
    let long = "v".repeat(60);
    register_handler(&http, &d.base, &admin, registration(&long, &["ab_one"])).await;
    let cut = format!("{long}__ab");
    let own = "w".repeat(60);
    let tries = [
        // Another handler's tool name.
        registration("a", &["b__c"]),
        // Two of its own actions under one name.
        registration("mail", &["send.email", "send_email"]),
        // Cut at 64 characters: every action of this 64-character id is
        // one name, the other handler's.
        registration(&cut, &["zz"]),
        // Two of its own actions that differ past the cut.
        registration(&own, &["ab_one", "ab_two"]),
    ];
    for reg in tries {
        let (s, b) = call(
            &http,
            Method::POST,
            format!("{}/v1/handlers", d.base),
            &admin,
            Some(reg.clone()),
        )
        .await;
        assert_eq!(s, 422, "{reg}: {b}");
    }
    // Replacing a registration is held to the same.
    let (s, b) = call(
        &http,
        Method::PUT,
        format!("{}/v1/handlers/a__b", d.base),
        &admin,
        Some(registration("a__b", &["c", "c.d", "c_d"])),
    )
    .await;
    assert_eq!(s, 422, "{b}");
    // A handler's own tool names do not clash with themselves when it is
    // replaced.
    let (s, b) = call(
        &http,
        Method::PUT,
        format!("{}/v1/handlers/a__b", d.base),
        &admin,
        Some(registration("a__b", &["c", "d"])),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut names = tool_names(&http, &d.base, &agent).await;
    let all = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all, "{names:?}");
    d.stop();
}

/// The two registrations `a` + `b__c` and `a__b` + `c` of round `i`.
fn clashing(i: usize) -> [Value; 2] {
    [
        registration(&format!("r{i}"), &["b__c"]),
        registration(&format!("r{i}__b"), &["c"]),
    ]
}

/// How many of `regs`, sent to `bases` at the same moment, were taken.
async fn taken_at_once(
    http: &reqwest::Client,
    bases: [&str; 2],
    admin: &str,
    regs: [Value; 2],
) -> usize {
    let sends = bases.into_iter().zip(regs).map(|(base, reg)| {
        call(
            http,
            Method::POST,
            format!("{base}/v1/handlers"),
            admin,
            Some(reg),
        )
    });
    let answers = futures::future::join_all(sends).await;
    for (s, b) in &answers {
        assert!(*s == 201 || *s == 422, "{s}: {b}");
    }
    answers.iter().filter(|(s, _)| *s == 201).count()
}

/// Two registrations whose actions would share one MCP tool name, sent at
/// the same moment: each was checked against the handlers stored before
/// either, so both got in (and the shared name then called neither).
/// Exactly one is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clashing_registrations_sent_at_once_are_not_both_taken() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    for i in 0..20 {
        let taken = taken_at_once(&http, [&d.base, &d.base], &admin, clashing(i)).await;
        assert_eq!(taken, 1, "round {i}");
    }
    d.stop();
}

/// On Postgres a registration through one daemon is checked against one
/// made through another a moment before, not against what the first
/// daemon last cached of the handlers; and of two clashing ones sent at
/// once through two daemons, one is taken.
#[test]
fn on_postgres_clashing_registrations_through_two_daemons_are_not_both_taken() {
    let Some(cluster) = crate::common::pg_cluster::Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let env = [("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())];
    let (dir_one, dir_two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let one = Daemon::start(dir_one.path(), &env);
    let admin = one.admin_key();
    let two = Daemon::start(dir_two.path(), &env);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let http = client();
        // Both daemons have listed the handlers (and cached them).
        let agent = agent_key(&http, &one.base, &admin, "bot").await;
        for base in [&one.base, &two.base] {
            tool_names(&http, base, &agent).await;
        }
        let [a, b] = clashing(0);
        register_handler(&http, &one.base, &admin, a).await;
        let (s, body) = call(
            &http,
            Method::POST,
            format!("{}/v1/handlers", two.base),
            &admin,
            Some(b),
        )
        .await;
        assert_eq!(s, 422, "{body}");
        for i in 1..20 {
            let taken = taken_at_once(&http, [&one.base, &two.base], &admin, clashing(i)).await;
            assert_eq!(taken, 1, "round {i}");
        }
    });
}
