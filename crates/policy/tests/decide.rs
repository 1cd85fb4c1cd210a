//! Decision order (deny pattern > grant > allow > ask > deny), what a
//! decision reports, shell segments and the backtracking limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use actiongate_policy::chrono::{DateTime, TimeZone, Utc};
use actiongate_policy::{
    CustomProfile, Grant, GrantTarget, ListKind, PermissionRef, Profile, Request, Rule,
    ToolPattern, Verdict, check, decide, format_action, get_preset,
};
use serde_json::{Map, json};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 1, 12, 0, 0).unwrap()
}

fn profile(allow: &[&str], ask: &[&str], deny: &[&str]) -> Profile {
    let v = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
    Profile::custom(CustomProfile {
        allow: v(allow),
        ask: v(ask),
        deny: v(deny),
        shell_tools: vec![],
        approvals: vec![],
        examples: Default::default(),
        max_per_hour: None,
        rule_limits: Vec::new(),
        taints: Vec::new(),
        guarded: Vec::new(),
    })
    .unwrap()
}

fn tool_grant(id: &str, tool: &str, pattern: &str) -> Grant {
    Grant {
        id: id.into(),
        agent: None,
        target: GrantTarget::Tool(ToolPattern::new(tool, pattern).unwrap()),
        expires_at: None,
        revoked_at: None,
    }
}

fn permission_grant(id: &str, scope: serde_json::Value) -> Grant {
    Grant {
        id: id.into(),
        agent: None,
        target: GrantTarget::Permission {
            handler: "email".into(),
            permission: "send".into(),
            scope: scope.as_object().cloned().unwrap_or_default(),
        },
        expires_at: None,
        revoked_at: None,
    }
}

fn req<'a>(tool: &'a str, detail: &'a str) -> Request<'a> {
    Request {
        agent: "agent-1",
        tool,
        detail,
        permission: None,
    }
}

#[test]
fn deny_pattern_beats_tool_grant() {
    let p = profile(&[".*"], &[], &["tool:bash:rm .*"]);
    let grants = [tool_grant("g1", "bash", ".*")];
    let d = decide(&p, &grants, &req("bash", "rm -rf ~"), now());
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!(
        d.rule,
        Some(Rule::Pattern {
            list: ListKind::Deny,
            index: 0,
            pattern: "tool:bash:rm .*".into()
        })
    );
}

#[test]
fn deny_pattern_beats_permission_grant() {
    let p = profile(&[], &[], &["tool:email:send.*"]);
    let grants = [permission_grant("g1", json!({}))];
    let scope = Map::new();
    let request = Request {
        agent: "agent-1",
        tool: "email",
        detail: "send",
        permission: Some(PermissionRef {
            handler: "email",
            permission: "send",
            scope: &scope,
            call: None,
        }),
    };
    assert_eq!(decide(&p, &grants, &request, now()).verdict, Verdict::Deny);
    let no_deny = profile(&[], &[], &[]);
    let d = decide(&no_deny, &grants, &request, now());
    assert_eq!(
        (d.verdict, d.rule),
        (Verdict::Allow, Some(Rule::Grant { id: "g1".into() }))
    );
}

#[test]
fn grant_beats_ask() {
    let p = profile(&[], &["tool:npm:.*"], &[]);
    let grants = [tool_grant("g7", "npm", "test( .*)?")];
    let d = decide(&p, &grants, &req("npm", "test --watch"), now());
    assert_eq!(
        (d.verdict, d.rule),
        (Verdict::Allow, Some(Rule::Grant { id: "g7".into() }))
    );
    assert!(d.reason.contains("g7"), "{}", d.reason);
    // Without the grant the profile asks.
    assert_eq!(
        decide(&p, &[], &req("npm", "test --watch"), now()).verdict,
        Verdict::Ask
    );
}

#[test]
fn grant_is_reported_ahead_of_an_allow_pattern() {
    let p = profile(&["tool:npm:.*"], &[], &[]);
    let grants = [tool_grant("g7", "npm", "test")];
    let d = decide(&p, &grants, &req("npm", "test"), now());
    assert_eq!(
        (d.verdict, d.rule),
        (Verdict::Allow, Some(Rule::Grant { id: "g7".into() }))
    );
}

#[test]
fn allow_beats_ask_and_reports_the_pattern() {
    let p = profile(&["tool:file:x", "tool:file:.*"], &["tool:file:.*"], &[]);
    let d = decide(&p, &[], &req("file", "view a"), now());
    assert_eq!(d.verdict, Verdict::Allow);
    assert_eq!(
        d.rule,
        Some(Rule::Pattern {
            list: ListKind::Allow,
            index: 1,
            pattern: "tool:file:.*".into()
        })
    );
    assert!(d.reason.contains("tool:file:.*"), "{}", d.reason);
}

#[test]
fn ask_beats_default_deny() {
    let p = profile(&[], &["tool:file:.*"], &[]);
    let d = decide(&p, &[], &req("file", "create a"), now());
    assert_eq!(d.verdict, Verdict::Ask);
    assert!(matches!(
        d.rule,
        Some(Rule::Pattern {
            list: ListKind::Ask,
            index: 0,
            ..
        })
    ));
}

#[test]
fn nothing_matching_denies_by_default() {
    let d = decide(
        &profile(&["tool:a:.*"], &[], &[]),
        &[],
        &req("b", "x"),
        now(),
    );
    assert_eq!((d.verdict, d.rule), (Verdict::Deny, Some(Rule::Default)));
    assert!(d.reason.contains("default"), "{}", d.reason);
}

#[test]
fn strictest_shell_command_wins() {
    let p = profile(
        &["tool:bash:ls( .*)?"],
        &["tool:bash:rm .*"],
        &["tool:bash:curl .*"],
    );
    assert_eq!(
        decide(&p, &[], &req("bash", "ls -la"), now()).verdict,
        Verdict::Allow
    );
    let d = decide(&p, &[], &req("bash", "ls; rm x"), now());
    assert_eq!(d.verdict, Verdict::Ask);
    assert!(d.reason.contains("rm x"), "{}", d.reason);
    let d = decide(&p, &[], &req("bash", "ls && rm x | curl evil"), now());
    assert_eq!(d.verdict, Verdict::Deny);
    assert!(matches!(
        d.rule,
        Some(Rule::Pattern {
            list: ListKind::Deny,
            ..
        })
    ));
    assert!(d.reason.contains("curl evil"), "{}", d.reason);
    // A command that no list mentions denies the whole line.
    assert_eq!(
        decide(&p, &[], &req("bash", "ls; make"), now()).verdict,
        Verdict::Deny
    );
}

#[test]
fn deny_patterns_also_see_the_whole_shell_line() {
    let p = profile(&[".*"], &[], &["tool:bash:.*--no-verify.*"]);
    assert_eq!(check("tool:bash:git commit --no-verify", &p), Verdict::Deny);
    assert_eq!(check("tool:bash:ls | grep x", &p), Verdict::Allow);
}

#[test]
fn hazards_cap_allow_at_ask_with_a_reason() {
    let p = profile(&["tool:bash:ls( .*)?"], &[], &[]);
    let d = decide(&p, &[], &req("bash", "ls > out.txt"), now());
    assert_eq!(d.verdict, Verdict::Ask);
    assert!(d.reason.contains("out.txt"), "{}", d.reason);
    assert!(matches!(
        d.rule,
        Some(Rule::Pattern {
            list: ListKind::Allow,
            ..
        })
    ));
    // Hazards never raise a deny to ask.
    let d = decide(
        &profile(&[], &[], &[]),
        &[],
        &req("bash", "ls > out.txt"),
        now(),
    );
    assert_eq!(d.verdict, Verdict::Deny);
}

#[test]
fn hazards_cap_even_the_open_preset() {
    // `open` allows everything it can see; a hidden command goes to a human.
    let open = get_preset("open").unwrap();
    assert_eq!(check("tool:bash:rm -rf /tmp/x", &open), Verdict::Allow);
    assert_eq!(check("tool:bash:ls $(rm -rf ~)", &open), Verdict::Ask);
}

#[test]
fn shell_tools_of_the_profile_are_parsed() {
    let plain = profile(&["tool:Bash:ls( .*)?"], &[], &[]);
    // Not a shell tool: the pattern sees one string, as written.
    assert_eq!(check("tool:Bash:ls -la; rm -rf ~", &plain), Verdict::Allow);
    let shell = Profile::custom(CustomProfile {
        allow: vec!["tool:Bash:ls( .*)?".into()],
        ask: vec![],
        deny: vec![],
        shell_tools: vec!["Bash".into()],
        approvals: vec![],
        examples: Default::default(),
        max_per_hour: None,
        rule_limits: Vec::new(),
        taints: Vec::new(),
        guarded: Vec::new(),
    })
    .unwrap();
    assert_eq!(check("tool:Bash:ls -la; rm -rf ~", &shell), Verdict::Deny);
    assert_eq!(check("tool:Bash:ls -la", &shell), Verdict::Allow);
}

/// A look-around pattern that backtracks exponentially on `aaa…c`.
const CATASTROPHIC: &str = "tool:x:(?:(a|aa)+)+(?!x)b";

fn catastrophic_input() -> String {
    format!("tool:x:{}c", "a".repeat(40))
}

#[test]
fn backtrack_limit_in_allow_list_denies_naming_the_pattern() {
    // The ask list would match; the unknown allow answer must still deny.
    let p = profile(&[CATASTROPHIC], &[".*"], &[]);
    let action = catastrophic_input();
    let (tool, detail) = actiongate_policy::split_action(&action).unwrap();
    let d = decide(&p, &[], &req(tool, detail), now());
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!(
        d.rule,
        Some(Rule::Pattern {
            list: ListKind::Allow,
            index: 0,
            pattern: CATASTROPHIC.into()
        })
    );
    assert!(
        d.reason.contains("backtracking limit") && d.reason.contains(CATASTROPHIC),
        "{}",
        d.reason
    );
    assert_eq!(check(&action, &p), Verdict::Deny);
    // On ordinary input the pattern works.
    assert_eq!(check("tool:x:aab", &p), Verdict::Allow);
}

#[test]
fn backtrack_limit_in_deny_or_ask_list_denies() {
    let action = catastrophic_input();
    assert_eq!(
        check(&action, &profile(&[], &[CATASTROPHIC], &[])),
        Verdict::Deny
    );
    assert_eq!(
        check(&action, &profile(&[".*"], &[], &[CATASTROPHIC])),
        Verdict::Deny
    );
}

#[test]
fn backtrack_limit_in_a_grant_denies() {
    let grants = [tool_grant("slow", "x", "(?:(a|aa)+)+(?!x)b")];
    let detail = format!("{}c", "a".repeat(40));
    let d = decide(
        &get_preset("guarded").unwrap(),
        &grants,
        &req("x", &detail),
        now(),
    );
    assert_eq!(
        (d.verdict, d.rule),
        (Verdict::Deny, Some(Rule::Grant { id: "slow".into() }))
    );
}

#[test]
fn check_and_decide_agree() {
    let actions = [
        ("file", "view a"),
        ("git", "push origin"),
        ("git", "commit"),
        ("bash", "ls -la | head"),
        ("bash", "ls > f"),
        ("bash", "rm -rf ~"),
        ("self_edit", "x"),
        ("bash", "ls 'unterminated"),
    ];
    for name in actiongate_policy::preset_names() {
        let p = get_preset(name).unwrap();
        for (tool, detail) in actions {
            assert_eq!(
                check(&format_action(tool, detail), &p),
                decide(&p, &[], &req(tool, detail), now()).verdict,
                "{name} {tool} {detail}"
            );
        }
    }
}

#[test]
fn guarded_asks_for_everything_and_readonly_allows_reads() {
    let guarded = get_preset("guarded").unwrap();
    for a in [
        "tool:file:view x",
        "tool:bash:ls",
        "tool:Write:a\nb",
        "tool:x:",
    ] {
        assert_eq!(check(a, &guarded), Verdict::Ask, "{a:?}");
    }
    let readonly = get_preset("readonly").unwrap();
    for a in [
        "tool:Read:/etc/hosts",
        "tool:Glob:**/*.rs",
        "tool:Grep:fn main",
        "tool:fs:read_file src/lib.rs",
        // The agents' own bookkeeping.
        r#"tool:TodoWrite:{"todos":[{"content":"fix it","status":"pending"}]}"#,
        r#"tool:todowrite:{"todos":[]}"#,
        r#"tool:update_todo:{"todos":"- [ ] fix it"}"#,
        r#"tool:write_todos:{"todos":[{"description":"fix it","status":"pending"}]}"#,
        r#"tool:report_intent:{"intent":"Reading the tests"}"#,
        r#"tool:read_bash:{"sessionId":"1","delay":5}"#,
        "tool:list_bash:{}",
        // Claude Code 2.1's task tracker, its deferred tools, its questions
        // and plan mode; Gemini CLI's and opencode's alike.
        r#"tool:TaskCreate:{"subject":"fix it","description":"the test"}"#,
        r#"tool:TaskUpdate:{"taskId":"1","status":"completed"}"#,
        "tool:TaskList:{}",
        r#"tool:TaskOutput:{"task_id":"b1","block":false,"timeout":1000}"#,
        r#"tool:ToolSearch:{"query":"select:TaskCreate"}"#,
        r#"tool:AskUserQuestion:{"questions":[{"question":"Which?","header":"Lib","options":[]}]}"#,
        "tool:EnterPlanMode:{}",
        r#"tool:ExitPlanMode:{"plan":"1. fix"}"#,
        r#"tool:ask_user:{"question":"Which?"}"#,
        r#"tool:exit_plan_mode:{"plan_filename":"plan.md"}"#,
        r#"tool:tracker_create_task:{"title":"fix it"}"#,
        r#"tool:update_topic:{"title":"Tests"}"#,
        r#"tool:question:{"questions":[]}"#,
    ] {
        assert_eq!(check(a, &readonly), Verdict::Allow, "{a:?}");
    }
    // Starting or stopping work is not bookkeeping.
    for a in [
        r#"tool:Task:{"prompt":"x"}"#,
        r#"tool:Agent:{"prompt":"x","subagent_type":"general-purpose"}"#,
        r#"tool:TaskStop:{"task_id":"b1"}"#,
        r#"tool:task:{"prompt":"x"}"#,
        r#"tool:invoke_agent:{"prompt":"x"}"#,
        r#"tool:stop_bash:{"sessionId":"1"}"#,
        "tool:TodoWrite:a\nb",
    ] {
        assert_eq!(check(a, &readonly), Verdict::Ask, "{a:?}");
    }
    // Network tools: reading a secret and sending it off needs a human.
    for a in [
        "tool:WebSearch:rust",
        "tool:WebFetch:https://x",
        "tool:bash:curl https://x",
        "tool:bash:wget https://x",
        "tool:bash:nc x 80",
        "tool:bash:cat < /dev/tcp/127.0.0.1/80",
        "tool:fs:create_file x",
        "tool:fs:execute_command ls",
    ] {
        assert_eq!(check(a, &readonly), Verdict::Ask, "{a:?}");
    }
    for a in [
        "tool:Write:/x",
        "tool:Edit:/x",
        "tool:NotebookEdit:x",
        "tool:bash:rm x",
        "tool:bash:git push",
    ] {
        assert_eq!(check(a, &readonly), Verdict::Ask, "{a:?}");
    }
}

#[test]
fn decision_serializes_with_tagged_rule() {
    let d = decide(
        &profile(&["tool:a:.*"], &[], &[]),
        &[],
        &req("a", "b"),
        now(),
    );
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["verdict"], "allow");
    assert_eq!(
        v["rule"],
        json!({"kind": "pattern", "list": "allow", "index": 0, "pattern": "tool:a:.*"})
    );
    let d = decide(&profile(&[], &[], &[]), &[], &req("a", "b"), now());
    assert_eq!(
        serde_json::to_value(&d).unwrap()["rule"],
        json!({"kind": "default"})
    );
}

/// `standard` asks for file writes that plant programs (git's directory and
/// configuration, shell start-up files, tool configuration) and allows the
/// rest; it allows the reference executor's reads and asks for its writes
/// and commands.
#[test]
fn standard_asks_for_writes_that_plant_programs() {
    let p = get_preset("standard").unwrap();
    for a in [
        "tool:file:write .git/config",
        "tool:file:edit /srv/app/.git/hooks/pre-commit",
        "tool:file:write ./.git/info/attributes",
        "tool:file:write app/../.git/config",
        "tool:file:write .GIT/config",
        "tool:file:write .git",
        "tool:file:edit /home/u/.bashrc",
        "tool:file:write ~/.profile",
        "tool:file:write ~/.zshrc",
        "tool:file:write ~/.bash_profile",
        "tool:file:write .gitconfig",
        "tool:file:write .gitmodules",
        "tool:file:write .gitattributes",
        "tool:file:write .claude/settings.json",
        "tool:file:write .vscode/tasks.json",
        "tool:file:write .github/workflows/ci.yml",
        "tool:file:write .cargo/config.toml",
        "tool:file:write ~/.config/fish/config.fish",
        "tool:file:write ~/.ssh/authorized_keys",
        "tool:file:write ~/.local/bin/git",
        "tool:file:write .envrc",
        "tool:file:write .npmrc",
        "tool:file:notebook_edit .git/x.ipynb",
        "tool:fs:create_file x",
        "tool:fs:update_file x",
        "tool:fs:execute_command ls",
    ] {
        assert_eq!(check(a, &p), Verdict::Ask, "{a:?}");
        assert_eq!(
            decide(&p, &[], &req_of(a), now()).verdict,
            Verdict::Ask,
            "{a:?}"
        );
    }
    for a in [
        "tool:file:write src/lib.rs",
        "tool:file:edit /srv/app/.gitignore",
        "tool:file:write docs/git/notes.md",
        "tool:file:write .github-notes.md",
        "tool:file:view .git/config",
        "tool:file:write my.bashrc.example",
        "tool:fs:read_file src/lib.rs",
        "tool:git:status",
    ] {
        assert_eq!(check(a, &p), Verdict::Allow, "{a:?}");
    }
}

fn req_of(action: &str) -> actiongate_policy::Request<'_> {
    let (tool, detail) = actiongate_policy::split_action(action).unwrap();
    actiongate_policy::Request {
        agent: "a",
        tool,
        detail,
        permission: None,
    }
}
