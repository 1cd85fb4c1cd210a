//! `check` skips the shell analysis only where the verdict cannot depend on
//! it: the shortcut and always parsing must agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::check_with;
use crate::profile::ShellShortcut;
use crate::{CustomProfile, Profile, Verdict, check, get_preset};
use proptest::prelude::*;

fn profile(allow: &[&str], ask: &[&str], deny: &[&str]) -> Profile {
    let v = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
    Profile::custom(CustomProfile {
        allow: v(allow),
        ask: v(ask),
        deny: v(deny),
        shell_tools: vec!["zsh".into()],
        approvals: vec![],
        examples: Default::default(),
        max_per_hour: None,
        rule_limits: Vec::new(),
        taints: Vec::new(),
        guarded: Vec::new(),
    })
    .unwrap()
}

#[test]
fn presets_skip_parsing_where_it_cannot_matter() {
    let kind = |name: &str, tool: &str| get_preset(name).unwrap().shell_shortcut(tool);
    assert_eq!(kind("guarded", "bash"), Some(ShellShortcut::Always));
    assert_eq!(kind("locked", "bash"), Some(ShellShortcut::Always));
    assert_eq!(
        kind("standard", "bash"),
        Some(ShellShortcut::WithoutNewline)
    );
    // `sh` is a shell tool too, but `standard` asks only for `bash`, so
    // every `sh` action is denied by default.
    assert_eq!(kind("standard", "sh"), Some(ShellShortcut::Always));
    // `open` and `readonly` allow shell commands, which hazards cap.
    assert_eq!(kind("open", "bash"), Some(ShellShortcut::Never));
    assert_eq!(kind("readonly", "sh"), Some(ShellShortcut::Never));
    assert_eq!(kind("standard", "file"), None);
}

#[test]
fn shortcut_needs_every_list_to_be_out_of_reach_or_uniform() {
    let kind = |p: Profile| p.shell_shortcut("bash").unwrap();
    use ShellShortcut::{Always, Never, WithoutNewline};
    assert_eq!(
        kind(profile(&[], &["tool:bash:.*"], &["tool:git:.*"])),
        WithoutNewline
    );
    assert_eq!(kind(profile(&[], &["tool:bash:.*"], &["tool:ba.*"])), Never);
    assert_eq!(
        kind(profile(&[], &["tool:bash:.*"], &["tool:b(?!x).*"])),
        Never
    );
    assert_eq!(
        kind(profile(&["tool:(bash|sh):ls"], &["(?s).*"], &[])),
        Never
    );
    assert_eq!(
        kind(profile(&["tool:(git|sh):.*"], &["(?s).*"], &[])),
        Always
    );
    assert_eq!(kind(profile(&[], &["tool:bash:rm.*"], &[])), Never);
    assert_eq!(kind(profile(&[], &["tool:bash:(?!rm).*"], &[])), Never);
    // A backtracking pattern may hit its limit on one command and not on
    // another, even beside a pattern that matches everything.
    assert_eq!(
        kind(profile(&[], &[r"tool:bash:(\w)\1.*", "(?s).*"], &[])),
        Never
    );
    // A literal look-ahead is matched exactly and has no limit to hit.
    assert_eq!(
        kind(profile(&[], &["tool:bash:(?!rm).*", "(?s).*"], &[])),
        Always
    );
    assert_eq!(
        kind(profile(&[], &[r"tool:git:(\w)\1.*", "(?s).*"], &[])),
        Always
    );
    assert_eq!(
        kind(profile(&[], &["tool:bash:rm.*", "tool:(?s).*"], &[])),
        Always
    );
    assert_eq!(kind(profile(&[], &["tool:bash:.+"], &[])), Never);
    assert_eq!(kind(profile(&[], &["tool:bas.+"], &[])), WithoutNewline);
    assert_eq!(kind(profile(&[], &["tool:git:.*"], &[])), Always);
}

#[test]
fn multi_line_bash_still_asks_under_standard() {
    // `tool:bash:.*` does not match the two-line action as a whole, but it
    // matches each of its commands; only parsing sees that.
    let standard = get_preset("standard").unwrap();
    let action = "tool:bash:ls\nrm -rf ~";
    assert_eq!(check(action, &standard), Verdict::Ask);
    assert_eq!(check_with(action, &standard, false), Verdict::Ask);
    // A quoted newline stays inside its command, which then matches no
    // pattern: denied, with or without the shortcut.
    let action = "tool:bash:echo 'a\nb'";
    assert_eq!(check(action, &standard), Verdict::Deny);
    assert_eq!(check_with(action, &standard, false), Verdict::Deny);
    assert_eq!(check("tool:bash:ls -la", &standard), Verdict::Ask);
}

/// Patterns that reach shell actions in different ways: not at all, all of
/// them, all single-line ones, some of them, through look-around.
const PATTERNS: &[&str] = &[
    "tool:bash:.*",
    "tool:bash:(?s).*",
    "(?s).*",
    ".*",
    "tool:ba.*",
    "tool:bash:.+",
    "tool:bash:rm.*",
    "tool:bash:ls( .*)?",
    "tool:(bash|sh):(ls|echo)( .*)?",
    "tool:bash:(?!rm).*",
    "tool:file:.*",
    "tool:git:(?!push).*",
    "tool:sh:.*",
    "tool:zsh:.*",
    "tool:bash:",
    "tool:bash:ls",
    "tool:bash:.*rm.*",
    "tool:.*",
    "tool:[bz].*",
];

/// Pieces of shell commands: plain words, quoting, substitutions,
/// separators, newlines, redirections.
const PIECES: &[&str] = &[
    "ls",
    "-la",
    "rm",
    "-rf",
    "x",
    "echo",
    "'a b'",
    "\"q\"",
    "$'n\\n'",
    "$(id)",
    "`id`",
    "|",
    ";",
    "&&",
    "\n",
    ">",
    "f",
    "cat",
    "<<EOF\nhi\nEOF\n",
    "x=1",
    "(",
    ")",
    "'",
    "\\\n",
    "#",
    "é",
];

fn list() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(prop::sample::select(PATTERNS).prop_map(str::to_owned), 0..3)
}

fn command() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..7).prop_map(|p| p.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn shortcut_agrees_with_always_parsing(
        allow in list(),
        ask in list(),
        deny in list(),
        tool in prop::sample::select(&["bash", "sh", "zsh", "file"][..]),
        detail in command(),
    ) {
        let profile = Profile::custom(CustomProfile {
            allow,
            ask,
            deny,
            shell_tools: vec!["zsh".into()],
            approvals: vec![],
            examples: Default::default(),
            max_per_hour: None,
            rule_limits: Vec::new(),
            taints: Vec::new(),
            guarded: Vec::new(),
        })
        .unwrap();
        let action = format!("tool:{tool}:{detail}");
        prop_assert_eq!(
            check_with(&action, &profile, true),
            check_with(&action, &profile, false),
            "{:?} under {:?}", action, profile.spec()
        );
    }
}
