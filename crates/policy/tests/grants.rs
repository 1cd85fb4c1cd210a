//! Grants: who they are for, when they count, scopes and globs, and
//! decision-only tool grants judged like allow patterns (shell-aware).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use actiongate_policy::chrono::{DateTime, Duration, TimeZone, Utc};
use actiongate_policy::{
    CALL_SCOPE_KEY, Grant, GrantTarget, PermissionRef, Request, Rule, ToolPattern, Verdict,
    call_scope_value, decide, decide_crediting, get_preset, line_pattern, literal_scope,
    scope_matches,
};
use serde_json::{Map, Value, json};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 1, 12, 0, 0).unwrap()
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn email_grant(agent: Option<&str>, scope: Value) -> Grant {
    Grant {
        id: "g1".into(),
        agent: agent.map(str::to_owned),
        target: GrantTarget::Permission {
            handler: "email".into(),
            permission: "send".into(),
            scope: obj(scope),
        },
        expires_at: None,
        revoked_at: None,
    }
}

fn email_request<'a>(agent: &'a str, scope: &'a Map<String, Value>) -> Request<'a> {
    Request {
        agent,
        tool: "email",
        detail: "send",
        permission: Some(PermissionRef {
            handler: "email",
            permission: "send",
            scope,
            call: None,
        }),
    }
}

#[test]
fn agent_specific_grant_covers_only_that_agent() {
    let scope = obj(json!({"to": "bob@example.com"}));
    let g = email_grant(Some("a1"), json!({}));
    assert!(g.covers(&email_request("a1", &scope), now()));
    assert!(!g.covers(&email_request("a2", &scope), now()));
}

#[test]
fn any_agent_grant_covers_every_agent() {
    let scope = obj(json!({"to": "bob@example.com"}));
    let g = email_grant(None, json!({}));
    assert!(g.covers(&email_request("a1", &scope), now()));
    assert!(g.covers(&email_request("someone-else", &scope), now()));
}

#[test]
fn revoked_grant_does_not_cover() {
    let scope = Map::new();
    let mut g = email_grant(None, json!({}));
    g.revoked_at = Some(now() - Duration::seconds(1));
    assert!(!g.is_active(now()));
    assert!(!g.covers(&email_request("a1", &scope), now()));
    g.revoked_at = Some(now());
    assert!(!g.is_active(now()));
}

#[test]
fn grant_expires_at_the_exact_instant() {
    let scope = Map::new();
    let mut g = email_grant(None, json!({}));
    g.expires_at = Some(now());
    assert!(!g.covers(&email_request("a1", &scope), now()));
    assert!(g.covers(
        &email_request("a1", &scope),
        now() - Duration::nanoseconds(1)
    ));
    g.expires_at = None;
    assert!(g.covers(&email_request("a1", &scope), now() + Duration::days(10_000)));
}

#[test]
fn handler_and_permission_must_match() {
    let scope = Map::new();
    let g = email_grant(None, json!({}));
    let mut r = email_request("a1", &scope);
    r.permission = Some(PermissionRef {
        handler: "email",
        permission: "delete",
        scope: &scope,
        call: None,
    });
    assert!(!g.covers(&r, now()));
    r.permission = Some(PermissionRef {
        handler: "sms",
        permission: "send",
        scope: &scope,
        call: None,
    });
    assert!(!g.covers(&r, now()));
    r.permission = None;
    assert!(!g.covers(&r, now()));
}

/// The permission `email`/`send` of a call (`None`: no call) in `scope`.
fn send_call<'a>(
    scope: &'a Map<String, Value>,
    call: Option<(&'a str, &'a Value)>,
) -> Option<PermissionRef<'a>> {
    Some(PermissionRef {
        handler: "email",
        permission: "send",
        scope,
        call,
    })
}

/// A plan step's grant covers its one call: that action with those params
/// as shown, whatever the rest of its scope admits; nothing forges it.
#[test]
fn a_grant_of_one_call_covers_that_call_only() {
    let params = json!({"to": "bob@example.com", "body": "hi"});
    let mut granted = obj(json!({"to": "bob@example.com"}));
    granted.insert(CALL_SCOPE_KEY.into(), call_scope_value("send", &params));
    let g = email_grant(None, Value::Object(granted.clone()));
    let scope = obj(json!({"to": "bob@example.com"}));
    let mut r = email_request("a1", &scope);
    r.permission = send_call(&scope, Some(("send", &params)));
    assert!(g.covers(&r, now()));
    // Another body to the same recipient, another action of the same
    // permission, or no call at all: not covered.
    let other = json!({"to": "bob@example.com", "body": "pay"});
    r.permission = send_call(&scope, Some(("send", &other)));
    assert!(!g.covers(&r, now()));
    r.permission = send_call(&scope, Some(("forward", &params)));
    assert!(!g.covers(&r, now()));
    r.permission = send_call(&scope, None);
    assert!(!g.covers(&r, now()));
    // A scope value named like the key (a handler's declared scope key)
    // does not stand in for the call.
    r.permission = send_call(&granted, Some(("send", &other)));
    assert!(!g.covers(&r, now()));
    // Other grants do not look at the call.
    let wide = email_grant(None, json!({"to": "bob@example.com"}));
    r.permission = send_call(&scope, Some(("send", &other)));
    assert!(wide.covers(&r, now()));
}

#[test]
fn scope_values_match_exactly_as_json() {
    let g = obj(json!({"to": "bob@example.com", "max": 5, "opts": {"a": [1, 2]}}));
    assert!(scope_matches(
        &g,
        &obj(json!({"to": "bob@example.com", "max": 5, "opts": {"a": [1, 2]}}))
    ));
    assert!(!scope_matches(
        &g,
        &obj(json!({"to": "bob@example.com", "max": 6, "opts": {"a": [1, 2]}}))
    ));
    assert!(!scope_matches(
        &g,
        &obj(json!({"to": "bob@example.com", "max": "5", "opts": {"a": [1, 2]}}))
    ));
    assert!(!scope_matches(
        &g,
        &obj(json!({"to": "BOB@example.com", "max": 5, "opts": {"a": [1, 2]}}))
    ));
}

/// A glob covers no value climbing out of it with `..`, nor one holding a
/// line break, unless it says so itself: `docs/*` is for what is in
/// `docs/`, which an executor resolving `docs/../../etc/x` would leave.
#[test]
fn a_glob_covers_no_value_that_climbs_out_or_breaks_its_line() {
    let g = obj(json!({"path": "docs/*"}));
    assert!(scope_matches(
        &g,
        &obj(json!({"path": "docs/guide/intro.md"}))
    ));
    assert!(scope_matches(&g, &obj(json!({"path": "docs/a..b.md"}))));
    for escaping in [
        "docs/../../etc/x",
        "docs/..",
        "docs/x/../../y",
        "docs\\..\\x",
        "docs/a\nb",
    ] {
        assert!(
            !scope_matches(&g, &obj(json!({"path": escaping}))),
            "{escaping}"
        );
    }
    let up = obj(json!({"path": "../shared/*"}));
    assert!(scope_matches(&up, &obj(json!({"path": "../shared/x"}))));
}

#[test]
fn a_literal_scope_matches_only_its_own_values_glob_characters_included() {
    let action = obj(json!({"to": "?*", "path": "/a/[b]{c}", "max": 5, "cmd": "ls *.rs"}));
    let g = literal_scope(&action);
    assert!(scope_matches(&g, &action));
    for other in [
        json!({"to": "xy", "path": "/a/[b]{c}", "max": 5, "cmd": "ls *.rs"}),
        json!({"to": "?*", "path": "/a/b", "max": 5, "cmd": "ls *.rs"}),
        json!({"to": "?*", "path": "/a/[b]{c}", "max": 5, "cmd": "ls main.rs"}),
    ] {
        assert!(!scope_matches(&g, &obj(other.clone())), "{other}");
    }
    // What holds no glob character is kept as it was.
    assert_eq!(g["max"], json!(5));
    assert_eq!(g["path"], json!("/a/[b]{c}"));
    // A shell line is still judged command by command; its literal covers
    // itself and nothing wider.
    let g = literal_scope(&obj(json!({"command": "ls *.rs"})));
    assert!(scope_matches(&g, &obj(json!({"command": "ls *.rs"}))));
    assert!(!scope_matches(&g, &obj(json!({"command": "ls x.rs"}))));
}

#[test]
fn glob_scope_matches_the_whole_string() {
    let g = obj(json!({"to": "*@example.com"}));
    assert!(scope_matches(&g, &obj(json!({"to": "bob@example.com"}))));
    assert!(scope_matches(&g, &obj(json!({"to": "a.b/c@example.com"}))));
    assert!(!scope_matches(
        &g,
        &obj(json!({"to": "bob@example.com.evil.org"}))
    ));
    assert!(!scope_matches(&g, &obj(json!({"to": "bob@example.org"}))));
    // A glob matches strings only.
    assert!(!scope_matches(&g, &obj(json!({"to": 5}))));
    let q = obj(json!({"file": "report-?.pdf"}));
    assert!(scope_matches(&q, &obj(json!({"file": "report-1.pdf"}))));
    assert!(!scope_matches(&q, &obj(json!({"file": "report-12.pdf"}))));
    // Without `*` or `?` the value is literal.
    let literal = obj(json!({"to": "[bob]@example.com"}));
    assert!(scope_matches(
        &literal,
        &obj(json!({"to": "[bob]@example.com"}))
    ));
    assert!(!scope_matches(
        &literal,
        &obj(json!({"to": "b@example.com"}))
    ));
}

#[test]
fn missing_grant_key_matches_any_value() {
    let g = obj(json!({"to": "bob@example.com"}));
    assert!(scope_matches(
        &g,
        &obj(json!({"to": "bob@example.com", "subject": "anything"}))
    ));
    assert!(scope_matches(&Map::new(), &obj(json!({"anything": 1}))));
}

#[test]
fn grant_key_missing_from_action_does_not_match() {
    let g = obj(json!({"to": "bob@example.com", "cc": "*"}));
    assert!(!scope_matches(&g, &obj(json!({"to": "bob@example.com"}))));
}

#[test]
fn permission_grant_allows_through_decide() {
    let scope = obj(json!({"to": "carol@example.com"}));
    let grants = [email_grant(Some("a1"), json!({"to": "*@example.com"}))];
    let d = decide(
        &get_preset("guarded").unwrap(),
        &grants,
        &email_request("a1", &scope),
        now(),
    );
    assert_eq!(
        (d.verdict, d.rule),
        (Verdict::Allow, Some(Rule::Grant { id: "g1".into() }))
    );
    let other = obj(json!({"to": "carol@evil.org"}));
    assert_eq!(
        decide(
            &get_preset("guarded").unwrap(),
            &grants,
            &email_request("a1", &other),
            now()
        )
        .verdict,
        Verdict::Ask
    );
}

fn npm_grant() -> Grant {
    Grant {
        id: "npm".into(),
        agent: Some("a1".into()),
        target: GrantTarget::Tool(ToolPattern::new("bash", "npm test( .*)?").unwrap()),
        expires_at: Some(now() + Duration::hours(1)),
        revoked_at: None,
    }
}

fn bash<'a>(detail: &'a str) -> Request<'a> {
    Request {
        agent: "a1",
        tool: "bash",
        detail,
        permission: None,
    }
}

/// A decision names the grants it rests on: those that allowed one of its
/// commands, not every grant of the list (an unrelated or expired one).
#[test]
fn a_decision_credits_the_grants_that_allowed_its_commands_only() {
    let profile = get_preset("readonly").unwrap();
    let grant = |id: &str, pattern: &str, expires: Duration| Grant {
        id: id.into(),
        agent: Some("a1".into()),
        target: GrantTarget::Tool(ToolPattern::new("bash", pattern).unwrap()),
        expires_at: Some(now() + expires),
        revoked_at: None,
    };
    let grants = [
        grant("unrelated", "make deploy", Duration::hours(1)),
        grant("build", "make build", Duration::hours(1)),
        grant("gone", "make ship", -Duration::seconds(1)),
        grant("ship", "make ship", Duration::hours(1)),
    ];
    let (d, used) = decide_crediting(&profile, &grants, &bash("make build && make ship"), now());
    assert_eq!(d.verdict, Verdict::Allow, "{}", d.reason);
    assert_eq!(used, vec!["build".to_owned(), "ship".to_owned()]);
    let (d, used) = decide_crediting(&profile, &grants, &bash("make other"), now());
    assert_ne!(d.verdict, Verdict::Allow);
    assert!(used.is_empty(), "{used:?}");
}

#[test]
fn tool_grant_covers_matching_commands() {
    let g = npm_grant();
    assert!(g.covers(&bash("npm test"), now()));
    assert!(g.covers(&bash("npm test -- --watch"), now()));
    assert!(g.covers(&bash("npm test && npm test"), now()));
    assert!(!g.covers(&bash("npm install"), now()));
    assert!(!g.covers(&bash("xnpm test"), now()));
    assert_eq!(
        g.target,
        GrantTarget::Tool(ToolPattern::new("bash", "npm test( .*)?").unwrap())
    );
}

/// A whole-line grant (a plan's step) allows its line as sent, in `covers`
/// and in `decide` alike, and none of its commands alone, reordered or
/// repeated; deny patterns and hazards still win.
#[test]
fn a_whole_line_grant_allows_its_line_and_not_its_commands() {
    let profile = get_preset("readonly").unwrap();
    let line = "cd /tmp/sandbox && rm -rf data";
    let g = Grant {
        id: "step".into(),
        agent: Some("a1".into()),
        target: GrantTarget::Tool(
            ToolPattern::whole_line("bash", &line_pattern(&profile, "bash", line).unwrap())
                .unwrap(),
        ),
        expires_at: None,
        revoked_at: None,
    };
    assert!(g.covers(&bash(line), now()));
    let d = decide(&profile, std::slice::from_ref(&g), &bash(line), now());
    assert_eq!(d.verdict, Verdict::Allow, "{}", d.reason);
    assert_eq!(d.rule, Some(Rule::Grant { id: "step".into() }));
    for other in [
        "rm -rf data",
        "cd /tmp/sandbox",
        "rm -rf data && cd /tmp/sandbox",
        "cd /tmp/sandbox && rm -rf data && rm -rf data",
        "cd /tmp/sandbox  && rm -rf data",
    ] {
        assert!(!g.covers(&bash(other), now()), "{other}");
        let d = decide(&profile, std::slice::from_ref(&g), &bash(other), now());
        assert_ne!(d.verdict, Verdict::Allow, "{other}: {}", d.reason);
    }
    // A line no grant can cover gets no whole-line grant either.
    assert!(line_pattern(&profile, "bash", "echo $(rm -rf /)").is_err());
    // It round-trips as a whole-line pattern.
    let text = serde_json::to_string(&g.target).unwrap();
    assert!(text.contains("\"whole_line\":true"), "{text}");
    let back: GrantTarget = serde_json::from_str(&text).unwrap();
    assert_eq!(back, g.target);
    assert_ne!(
        back,
        GrantTarget::Tool(
            ToolPattern::new("bash", &line_pattern(&profile, "bash", line).unwrap()).unwrap()
        )
    );
}

/// A grant for the `git` tool is matched against the canonical form, in
/// `covers` and in `decide` alike: quoting and inert global options do not
/// hide a command from it, and options that run programs keep it from
/// covering.
#[test]
fn a_git_tool_grant_sees_the_canonical_form() {
    let g = Grant {
        id: "commit".into(),
        agent: None,
        target: GrantTarget::Tool(ToolPattern::new("git", "commit -m .*").unwrap()),
        expires_at: None,
        revoked_at: None,
    };
    let git = |detail| Request {
        agent: "a1",
        tool: "git",
        detail,
        permission: None,
    };
    let locked = actiongate_policy::get_preset("locked").unwrap();
    for detail in [
        "commit -m 'push later'",
        " 'commit'  -m x",
        "--no-optional-locks commit -m x",
    ] {
        assert!(g.covers(&git(detail), now()), "{detail}");
        let d = decide(&locked, std::slice::from_ref(&g), &git(detail), now());
        assert_eq!(d.verdict, Verdict::Allow, "{detail}: {}", d.reason);
    }
    for detail in [
        "-c core.pager=sh commit -m x",
        "-C /tmp/evil commit -m x",
        "commit -m x; rm -rf ~",
        "commit -m $(id)",
        "push -m x",
    ] {
        assert!(!g.covers(&git(detail), now()), "{detail}");
        let d = decide(&locked, std::slice::from_ref(&g), &git(detail), now());
        assert_ne!(d.verdict, Verdict::Allow, "{detail}: {}", d.reason);
    }
}

#[test]
fn tool_grant_is_shell_aware() {
    let g = npm_grant();
    for detail in [
        "npm test; rm -rf ~",
        "npm test $(x)",
        "npm test `x`",
        "npm test > out",
        "npm test\nrm x",
        "npm test && curl x | sh",
    ] {
        assert!(!g.covers(&bash(detail), now()), "{detail:?}");
    }
    let guarded = get_preset("guarded").unwrap();
    let grants = [g];
    // Another command asks (guarded asks everything); the grant does not cover it.
    let d = decide(&guarded, &grants, &bash("npm test; rm -rf ~"), now());
    assert_eq!(d.verdict, Verdict::Ask);
    // A hazard caps the grant at ask, even under a profile that would deny.
    let nothing = actiongate_policy::Profile::custom(Default::default()).unwrap();
    for detail in ["npm test $(npm test)", "npm test > out"] {
        let d = decide(&nothing, &grants, &bash(detail), now());
        assert_eq!(d.verdict, Verdict::Ask, "{detail:?}");
        assert_eq!(d.rule, Some(Rule::Grant { id: "npm".into() }));
    }
    // Commands the grant does not cover are judged by the profile alone.
    assert_eq!(
        decide(&nothing, &grants, &bash("npm test; rm -rf ~"), now()).verdict,
        Verdict::Deny
    );
    assert_eq!(
        decide(&nothing, &grants, &bash("npm test $(x)"), now()).verdict,
        Verdict::Deny
    );
    assert_eq!(
        decide(&nothing, &grants, &bash("npm test -- -u"), now()).verdict,
        Verdict::Allow
    );
}

#[test]
fn tool_grant_for_other_agent_tool_or_time_does_not_apply() {
    let g = npm_grant();
    let mut other_agent = bash("npm test");
    other_agent.agent = "a2";
    assert!(!g.covers(&other_agent, now()));
    let mut other_tool = bash("npm test");
    other_tool.tool = "sh";
    assert!(!g.covers(&other_tool, now()));
    assert!(!g.covers(&bash("npm test"), now() + Duration::hours(1)));
}

#[test]
fn tool_grant_for_non_shell_tool_matches_whole_detail() {
    let g = Grant {
        id: "w".into(),
        agent: None,
        target: GrantTarget::Tool(ToolPattern::new("Write", "/tmp/.*").unwrap()),
        expires_at: None,
        revoked_at: None,
    };
    let r = |detail| Request {
        agent: "a",
        tool: "Write",
        detail,
        permission: None,
    };
    assert!(g.covers(&r("/tmp/x; rm -rf ~"), now()));
    assert!(!g.covers(&r("/etc/tmp/x"), now()));
    assert!(ToolPattern::new("bash", "(").is_err());
}

#[test]
fn grant_round_trips_through_json() {
    let g = npm_grant();
    let v = serde_json::to_value(&g).unwrap();
    assert_eq!(
        v["target"],
        json!({"kind": "tool", "tool": "bash", "pattern": "npm test( .*)?"})
    );
    let back: Grant = serde_json::from_value(v).unwrap();
    assert_eq!(back, g);
}

// The reference executor's `execute_command`: permission `shell.exec`,
// scope `{"command": <the line>}`, detail `execute_command <the line>`.

fn shell_grant(command_glob: &str) -> Grant {
    Grant {
        id: "gsh".into(),
        agent: Some("a1".into()),
        target: GrantTarget::Permission {
            handler: "fs".into(),
            permission: "shell.exec".into(),
            scope: obj(json!({ "command": command_glob })),
        },
        expires_at: None,
        revoked_at: None,
    }
}

fn command_request<'a>(detail: &'a str, scope: &'a Map<String, Value>) -> Request<'a> {
    Request {
        agent: "a1",
        tool: "fs",
        detail,
        permission: Some(PermissionRef {
            handler: "fs",
            permission: "shell.exec",
            scope,
            call: None,
        }),
    }
}

fn decide_command(profile: &str, grants: &[Grant], line: &str) -> Verdict {
    let scope = obj(json!({ "command": line }));
    let detail = format!("execute_command {line}");
    decide(
        &get_preset(profile).unwrap(),
        grants,
        &command_request(&detail, &scope),
        now(),
    )
    .verdict
}

#[test]
fn a_command_grant_covers_every_simple_command_or_nothing() {
    let grants = [shell_grant("ls*")];
    assert_eq!(decide_command("guarded", &grants, "ls -la"), Verdict::Allow);
    assert_eq!(
        decide_command("guarded", &grants, "ls -la && ls src"),
        Verdict::Allow
    );
    // The glob alone would match the whole line; the second command is not ls.
    assert!(glob_would_match_the_raw_line());
    assert_eq!(
        decide_command("guarded", &grants, "ls; rm -rf /"),
        Verdict::Ask
    );
    assert_eq!(decide_command("guarded", &grants, "ls | sh"), Verdict::Ask);
}

fn glob_would_match_the_raw_line() -> bool {
    // Any other scope key is matched as a plain glob over the whole string.
    scope_matches(
        &obj(json!({"path": "ls*"})),
        &obj(json!({"path": "ls; rm -rf /"})),
    )
}

#[test]
fn hazards_keep_a_command_grant_from_covering() {
    let grants = [shell_grant("*")];
    assert_eq!(
        decide_command("guarded", &grants, "echo hi"),
        Verdict::Allow
    );
    for line in [
        "echo $(cat /etc/shadow)",
        "echo x > /etc/passwd",
        "ls `rm -rf /`",
    ] {
        assert_eq!(
            decide_command("guarded", &grants, line),
            Verdict::Ask,
            "{line}"
        );
    }
    // An exact value covers exactly that line, but a hazard still caps the
    // decision at ask, as it does for every grant.
    let exact = [shell_grant("echo x > out.txt"), shell_grant("make test")];
    assert_eq!(
        decide_command("guarded", &exact, "make test"),
        Verdict::Allow
    );
    assert_eq!(
        decide_command("guarded", &exact, "echo x > out.txt"),
        Verdict::Ask
    );
}

#[test]
fn profile_patterns_judge_each_command_of_an_executor_command_line() {
    // `open` allows everything, but a hazard caps a command line at ask,
    // as it would for bash; a plain line stays allowed.
    assert_eq!(decide_command("open", &[], "ls -la"), Verdict::Allow);
    assert_eq!(
        decide_command("open", &[], "echo x > /etc/passwd"),
        Verdict::Ask
    );
    let profile = actiongate_policy::Profile::custom(actiongate_policy::CustomProfile {
        allow: vec!["tool:fs:execute_command ls.*".into()],
        ask: vec![],
        deny: vec!["tool:fs:execute_command rm .*".into()],
        shell_tools: vec![],
        approvals: vec![],
        examples: Default::default(),
        max_per_hour: None,
        rule_limits: Vec::new(),
        taints: Vec::new(),
        guarded: Vec::new(),
    })
    .unwrap();
    let scope = |l: &str| obj(json!({ "command": l }));
    let judge = |line: &str| {
        let s = scope(line);
        let detail = format!("execute_command {line}");
        decide(&profile, &[], &command_request(&detail, &s), now()).verdict
    };
    assert_eq!(judge("ls -la"), Verdict::Allow);
    // `ls.*` would match the whole line; each command is judged instead.
    assert_eq!(judge("ls; rm -rf /"), Verdict::Deny);
    assert_eq!(judge("ls && cat x"), Verdict::Deny);
}

/// A decision-only tool grant for a tool named like a handler does not allow
/// that handler's actions: they need a grant of their permission, scoped.
#[test]
fn a_tool_grant_never_allows_a_handler_action() {
    let profile = get_preset("guarded").unwrap();
    let tool_grant = Grant {
        id: "g-tool".into(),
        agent: None,
        target: GrantTarget::Tool(ToolPattern::new("email", "send").unwrap()),
        expires_at: None,
        revoked_at: None,
    };
    let scope = obj(json!({"to": "evil@attacker.example"}));
    let handler_req = email_request("a1", &scope);
    assert!(!tool_grant.covers(&handler_req, now()));
    let d = decide(
        &profile,
        std::slice::from_ref(&tool_grant),
        &handler_req,
        now(),
    );
    assert_ne!(d.verdict, Verdict::Allow, "{d:?}");
    // The same grant still allows the decision-only action it was made for.
    let plain = Request {
        agent: "a1",
        tool: "email",
        detail: "send",
        permission: None,
    };
    assert!(tool_grant.covers(&plain, now()));
    assert_eq!(
        decide(&profile, std::slice::from_ref(&tool_grant), &plain, now()).verdict,
        Verdict::Allow
    );
}
