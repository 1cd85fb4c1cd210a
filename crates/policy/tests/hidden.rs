//! Nothing hides a command from deny patterns (issue 23): commands inside
//! parameter expansions, arithmetic, quoted subscripts, here-strings and
//! the arguments of runners are shown to deny patterns, while the line
//! still never gets past ask without them.

use actiongate_policy::{
    CustomProfile, Dialect, Profile, Request, Verdict, analyze, check, decide, format_action,
};

/// Allows `echo`, `cat`, `ls` and `test`; asks for any other bash line;
/// denies `touch` as a command of its own.
fn deny_touch() -> Profile {
    let v = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
    Profile::custom(CustomProfile {
        allow: v(&[r"tool:(bash|sh|git):(echo|cat|ls|test|\[\[)( .*)?"]),
        ask: v(&["tool:(bash|sh|git):.*"]),
        deny: v(&["tool:(bash|sh|git):touch( .*)?"]),
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

fn verdict(tool: &str, detail: &str) -> Verdict {
    let profile = deny_touch();
    let checked = check(&format_action(tool, detail), &profile);
    let decided = decide(
        &profile,
        &[],
        &Request {
            agent: "a",
            tool,
            detail,
            permission: None,
        },
        actiongate_policy::chrono::Utc::now(),
    );
    assert_eq!(checked, decided.verdict, "{detail}: {}", decided.reason);
    checked
}

fn hidden(detail: &str) -> Vec<String> {
    analyze(Dialect::Bash, detail).hidden
}

#[track_caller]
fn assert_denied(details: &[&str]) {
    for detail in details {
        assert_eq!(verdict("bash", detail), Verdict::Deny, "{detail}");
    }
}

#[test]
fn deny_sees_a_command_in_a_default_value() {
    assert_denied(&[
        "echo ${x:-$(touch pwned)}",
        "echo ${x-$(touch pwned)}",
        "echo ${x:+$(touch pwned)}",
        "echo ${x:?$(touch pwned)}",
        "echo \"${x:-$(touch pwned)}\"",
    ]);
}

#[test]
fn deny_sees_a_command_in_an_assigned_default() {
    assert_denied(&["echo ${x:=$(touch pwned)}", "echo ${x=`touch pwned`}"]);
}

#[test]
fn deny_sees_a_command_in_a_substitution_pattern_or_replacement() {
    assert_denied(&[
        "echo ${x/a/$(touch pwned)}",
        "echo ${x//$(touch pwned)/b}",
        "echo ${x#$(touch pwned)}",
        "echo ${x%%$(touch pwned)}",
        "echo ${x:$(touch pwned):1}",
    ]);
}

#[test]
fn deny_sees_a_command_in_a_subscript() {
    assert_denied(&[
        "echo ${a[$(touch pwned)]}",
        "[[ -v 'a[$(touch pwned)]' ]]",
        "test -v 'a[$(touch pwned)]'",
        "[[ 1 -eq 'a[$(touch pwned)]' ]]",
        "let 'a[$(touch pwned)]=1'",
        "unset 'a[$(touch pwned)]'",
        "printf -v 'a[$(touch pwned)]' x",
    ]);
}

#[test]
fn deny_sees_a_command_inside_single_quotes_in_a_double_quoted_expansion() {
    // Bash runs it: inside `"${…}"` single quotes are plain characters.
    assert_denied(&["echo \"${x:-'$(touch pwned)'}\""]);
}

#[test]
fn deny_sees_a_command_in_arithmetic() {
    assert_denied(&[
        "echo $(( $(touch pwned) + 1 ))",
        "(( x = $(touch pwned) ))",
        "(( a[$(touch pwned)] ))",
        "for (( i = $(touch pwned); i < 1; i++ )); do ls; done",
        "echo $[ $(touch pwned) ]",
    ]);
}

#[test]
fn deny_sees_a_command_in_a_here_string_or_here_document() {
    assert_denied(&[
        "cat <<< ${x:-$(touch pwned)}",
        "cat <<< \"$(touch pwned)\"",
        "cat <<E\n${x:-$(touch pwned)}\nE",
    ]);
}

#[test]
fn deny_sees_nested_and_backquoted_commands() {
    assert_denied(&[
        "echo ${x:-$(echo $(touch pwned))}",
        "echo ${x:-`touch pwned`}",
        "echo ${x:-$(case a in a) touch pwned;; esac)}",
        "echo ${x:-<(touch pwned)}",
    ]);
}

#[test]
fn deny_sees_what_a_runner_runs() {
    assert_denied(&[
        "sudo touch pwned",
        "sudo -u root touch pwned",
        "env A=1 touch pwned",
        "command touch pwned",
        "nice -n 5 touch pwned",
        "timeout 5 touch pwned",
        "exec touch pwned",
        "eval 'touch pwned'",
        "eval \"ls; touch pwned\"",
        "bash -c 'touch pwned'",
        "sh -c 'ls && touch pwned'",
        "sudo sh -c 'touch pwned'",
        "trap 'touch pwned' EXIT",
        "ls | xargs touch",
        "find . -exec touch pwned ';'",
    ]);
    for detail in [
        "bisect run touch pwned",
        "submodule foreach 'touch pwned'",
        "-c core.pager='touch pwned' log",
        "-c alias.x='!touch pwned' x",
        "-c core.editor=touch commit",
        "rebase --exec 'touch pwned' main",
    ] {
        assert_eq!(verdict("git", detail), Verdict::Deny, "{detail}");
    }
}

#[test]
fn the_sh_tool_hides_nothing_from_deny_either() {
    for detail in ["echo ${x:-$(touch pwned)}", "sudo touch pwned"] {
        assert_eq!(verdict("sh", detail), Verdict::Deny, "{detail}");
    }
}

#[test]
fn a_hidden_command_that_deny_does_not_match_still_asks() {
    for detail in [
        "echo ${x:-$(ls)}",
        "echo $(( $(ls) ))",
        "sudo ls",
        "echo ${x:=default}",
        "echo $((x=1))",
    ] {
        assert_eq!(verdict("bash", detail), Verdict::Ask, "{detail}");
    }
}

#[test]
fn quoted_text_of_a_clean_line_is_not_a_command() {
    // Nothing runs, so nothing is hidden and the allow rule applies.
    assert_eq!(verdict("bash", "echo '$(touch pwned)'"), Verdict::Allow);
    assert_eq!(verdict("bash", "echo 'sudo touch pwned'"), Verdict::Allow);
    assert!(hidden("echo '$(touch pwned)'").is_empty());
    // A plain default and arithmetic over constants run nothing either.
    assert_eq!(
        verdict("bash", "echo ${x:-default} $((1+2))"),
        Verdict::Allow
    );
}

#[test]
fn hidden_commands_are_not_the_commands_judged_for_allow() {
    let a = analyze(Dialect::Bash, "echo ${x:-$(touch pwned)}");
    assert_eq!(a.commands, vec!["echo ${x:-$(touch pwned)}".to_owned()]);
    assert_eq!(a.hidden, vec!["touch pwned".to_owned()]);
    assert!(!a.is_clean());
}

#[test]
fn a_command_the_walk_lists_is_not_hidden_again() {
    let a = analyze(Dialect::Bash, "echo $(ls) > out");
    assert_eq!(a.commands, vec!["ls".to_owned(), "echo $(ls)".to_owned()]);
    assert!(a.hidden.is_empty(), "{:?}", a.hidden);
}

#[test]
fn a_substitution_that_never_parses_is_shown_as_written() {
    assert_eq!(
        hidden("echo ${x:-$(touch pwned ;;)}"),
        vec!["touch pwned ;;"]
    );
}

#[test]
fn the_search_is_bounded() {
    // Thousands of arguments to a runner: each suffix would be a command.
    let many = format!("sudo {}", "a ".repeat(4000));
    let a = analyze(Dialect::Bash, &many);
    assert!(!a.is_clean());
    assert!(a.hidden.iter().map(String::len).sum::<usize>() <= 4 * actiongate_policy::MAX_LEN);
    // Many substitutions inside an expansion.
    let subs = format!("echo ${{x:-{}}}", "$(ls)".repeat(200));
    assert!(!analyze(Dialect::Bash, &subs).is_clean());
}
