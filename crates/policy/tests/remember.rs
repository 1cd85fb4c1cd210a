//! "Remember" on compound commands (issue 23, item 9): one grant pattern
//! per simple command, or a plain reason why no grant can cover the line.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use actiongate_policy::{
    Grant, GrantTarget, Request, ToolPattern, Verdict, decide, get_preset, grant_patterns,
};

fn grant(tool: &str, pattern: &str) -> Grant {
    Grant {
        id: format!("g-{pattern}"),
        agent: Some("a".into()),
        target: GrantTarget::Tool(ToolPattern::new(tool, pattern).unwrap()),
        expires_at: None,
        revoked_at: None,
    }
}

#[test]
fn a_compound_line_gives_one_pattern_per_command_and_they_cover_it() {
    let p = get_preset("guarded").unwrap();
    let line = "cd app && cargo build";
    let patterns = grant_patterns(&p, "bash", line).unwrap();
    assert_eq!(patterns, ["cd app", "cargo build"]);
    let grants: Vec<Grant> = patterns.iter().map(|pat| grant("bash", pat)).collect();
    let req = Request {
        agent: "a",
        tool: "bash",
        detail: line,
        permission: None,
    };
    let now = actiongate_policy::chrono::Utc::now();
    assert_eq!(decide(&p, &grants, &req, now).verdict, Verdict::Allow);
    // One of the two alone does not cover the line: both are needed.
    assert_eq!(decide(&p, &grants[..1], &req, now).verdict, Verdict::Ask);
    // The raw line as a pattern (what "remember" used to build) never matches.
    let raw = grant("bash", &regex::escape(line));
    assert_eq!(decide(&p, &[raw], &req, now).verdict, Verdict::Ask);
}

#[test]
fn repeated_commands_give_one_pattern_and_git_its_canonical_form() {
    let p = get_preset("guarded").unwrap();
    assert_eq!(
        grant_patterns(&p, "bash", "ls -la; ls  -la | wc -l").unwrap(),
        [r"ls \-la", r"wc \-l"]
    );
    assert_eq!(
        grant_patterns(&p, "git", " 'commit' -m 'a.b'").unwrap(),
        [r"commit \-m a\.b"]
    );
    assert_eq!(
        grant_patterns(&p, "WebFetch", "https://x.y/a?b").unwrap(),
        [r"https://x\.y/a\?b"]
    );
}

#[test]
fn a_line_with_a_hazard_or_no_command_gets_a_reason() {
    let p = get_preset("guarded").unwrap();
    for (tool, line, why) in [
        ("bash", "ls > out.txt", "redirected to a file"),
        ("bash", "echo $(id)", "command substitution"),
        ("bash", "bash -c 'ls'", "runs another command"),
        ("sh", "ls &> /dev/null", "sh (dash)"),
        ("git", "-c core.pager=sh log", "-c"),
        ("bash", "", "runs no command"),
    ] {
        let err = grant_patterns(&p, tool, line).unwrap_err();
        assert!(err.reason.starts_with("no grant can cover"), "{err}");
        assert!(err.reason.contains(why), "{line}: {err}");
    }
}
