//! The `git` tool's analyser (issue 23, item 1): one test per rule, through
//! the public API, mostly under `standard` (`tool:git:(?!push).*` allowed,
//! `tool:git:push.*` asked).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use actiongate_policy::{
    CustomProfile, Dialect, Profile, Request, Rule, Verdict, analyze, check, decide, format_action,
    get_preset,
};

fn standard() -> Profile {
    get_preset("standard").unwrap()
}

fn verdict(detail: &str) -> Verdict {
    let p = standard();
    let checked = check(&format_action("git", detail), &p);
    let decided = decide(
        &p,
        &[],
        &Request {
            agent: "a",
            tool: "git",
            detail,
            permission: None,
        },
        actiongate_policy::chrono::Utc::now(),
    );
    assert_eq!(checked, decided.verdict, "{detail:?}: {}", decided.reason);
    checked
}

fn asks(details: &[&str]) {
    for d in details {
        assert_eq!(verdict(d), Verdict::Ask, "{d:?}");
    }
}

fn allowed(details: &[&str]) {
    for d in details {
        assert_eq!(verdict(d), Verdict::Allow, "{d:?}");
    }
}

#[test]
fn plain_uses_stay_allowed() {
    allowed(&[
        "status",
        "commit -m 'push later'",
        "commit -m \"push later\"",
        "log --grep=push",
        "diff HEAD~1",
        "log --oneline -n 5",
        "add src/lib.rs",
        "checkout -b feature",
        "branch new-feature",
        "fetch origin",
        "pull --rebase",
        "stash pop",
        "config user.name 'A B'",
        "config --get core.pager",
        "show HEAD:README.md",
        "rebase main",
        "merge -s ours x",
        "--version",
        "--no-optional-locks status",
    ]);
}

#[test]
fn push_in_any_disguise_is_asked() {
    asks(&[
        "push origin main",
        " push origin main",
        "push  origin main",
        "'push' origin main",
        "\"push\" origin main",
        "pu\\sh origin main",
        "-C . push origin main",
        "--no-pager push origin main",
        "-c core.pager=sh push origin main",
        "-P push origin main",
        "--git-dir=.git push origin main",
        "status && git push origin main",
        "status; git push",
        "status\ngit push",
        "status | git push",
        "$(echo push) origin main",
        "pu$'s'h origin main",
        "${x:-push} origin main",
    ]);
}

#[test]
fn the_canonical_form_is_what_patterns_and_the_rule_see() {
    let a = analyze(
        Dialect::Git,
        "--no-optional-locks  'commit'   -m 'push later'",
    );
    assert_eq!(a.commands, vec!["commit -m 'push later'"]);
    assert!(a.is_clean(), "{a:?}");
    let a = analyze(Dialect::Git, " push origin main");
    assert_eq!(a.commands, vec!["push origin main"]);
    // The ask rule that matched is `tool:git:push.*`, seen on the canonical form.
    let d = decide(
        &standard(),
        &[],
        &Request {
            agent: "a",
            tool: "git",
            detail: "'push' origin main",
            permission: None,
        },
        actiongate_policy::chrono::Utc::now(),
    );
    assert_eq!(d.verdict, Verdict::Ask);
    assert!(
        matches!(&d.rule, Some(Rule::Pattern { pattern, .. }) if pattern == "tool:git:push.*"),
        "{d:?}"
    );
    // The reason, which the audit keeps, names the canonical form.
    assert!(d.reason.contains("(command `push origin main`)"), "{d:?}");
    // A custom rule on the canonical form.
    let p = Profile::custom(CustomProfile {
        allow: vec!["tool:git:status".into()],
        ask: vec![],
        deny: vec!["tool:git:push.*".into()],
        shell_tools: vec![],
        approvals: vec![],
        examples: Default::default(),
        max_per_hour: None,
        rule_limits: Vec::new(),
        taints: Vec::new(),
        guarded: Vec::new(),
    })
    .unwrap();
    assert_eq!(check("tool:git: status", &p), Verdict::Allow);
    assert_eq!(check("tool:git:'push' x", &p), Verdict::Deny);
    assert_eq!(check("tool:git:status; git push", &p), Verdict::Deny);
}

#[test]
fn global_options_that_run_programs_or_change_configuration_ask() {
    asks(&[
        "-c alias.x=!sh x",
        "-c core.pager=sh log",
        "-c core.fsmonitor=./x status",
        "--config-env=core.pager=X log",
        "-C /tmp/evil status",
        "--git-dir=/tmp/evil/.git status",
        "--work-tree=/ status",
        "--exec-path=/tmp status",
        "-p log",
        "--paginate log",
        "--no-pager log",
        "--bare status",
        "--namespace=x status",
        "--help",
        "--unknown-option status",
    ]);
}

#[test]
fn subcommands_that_run_programs_ask() {
    asks(&[
        "submodule foreach 'rm -rf ~'",
        "filter-branch --tree-filter 'id' HEAD",
        "rebase --exec 'id' main",
        "rebase -x id main",
        "rebase --exec=id main",
        "rebase -i main",
        "bisect run ./x",
        "difftool HEAD",
        "mergetool",
        "send-email x.patch",
        "daemon --export-all",
        "hook run pre-commit",
        "credential fill",
        "instaweb",
        "merge-index ./x -a",
        "merge -s evil x",
        "merge --strategy=evil x",
        "pull -sevil",
        "upload-pack .",
        "svn dcommit",
        "subtree push --prefix=x origin main",
        "send-pack origin main",
    ]);
}

#[test]
fn options_that_run_programs_or_write_ask() {
    asks(&[
        "fetch --upload-pack='sh -c id' origin",
        "ls-remote --upload-pack=id origin",
        "clone -u id x y",
        "clone --template=/tmp/t x y",
        "clone -c core.fsmonitor=id x y",
        "clone --config core.pager=id x y",
        "clone ext::'sh -c id' y",
        "fetch ext::sh",
        "remote add x 'ext::sh -c id'",
        "fetch fd::3",
        "push --receive-pack=id origin",
        "push --exec=id origin",
        "archive --remote=origin --exec=id HEAD",
        "init --template=/tmp/t",
        "diff --output=.git/hooks/pre-commit",
        "log --ext-diff -p",
        "grep -O foo",
        "grep --open-files-in-pager foo",
        "help -w log",
    ]);
}

#[test]
fn config_writes_of_program_keys_ask_and_reads_do_not() {
    asks(&[
        "config core.pager 'sh -c id'",
        "config alias.st push",
        "config --global core.editor vim",
        "config core.fsmonitor ./x",
        "config core.hooksPath /tmp/h",
        "config credential.helper '!id'",
        "config diff.x.textconv id",
        "config filter.x.clean id",
        "config include.path /tmp/c",
        "config --add core.sshCommand id",
        "config set core.pager id",
        "config help.autocorrect 1",
        "config -f ~/.bashrc user.name x",
        "config --edit",
        "config -e",
        "config --rename-section x core",
    ]);
    allowed(&[
        "config user.email a@b.c",
        "config --list",
        "config -l",
        "config --get alias.x",
        "config get core.pager",
        "config core.pager",
        "config color.ui auto",
    ]);
}

#[test]
fn unknown_subcommands_may_be_aliases_and_ask() {
    asks(&["st", "psuh origin main", "lfs push", "git push", "x"]);
}

#[test]
fn shell_syntax_is_judged_as_the_same_bash_line() {
    asks(&[
        "status; rm -rf ~",
        "status && rm -rf ~",
        "status | sh",
        "status > .git/hooks/post-checkout",
        "log $(id)",
        "log `id`",
        "status < /dev/tcp/127.0.0.1/80",
        "log <(id)",
        "add *",
    ]);
}

#[test]
fn git_inside_bash_follows_the_same_rules() {
    let readonly = get_preset("readonly").unwrap();
    for line in [
        "git -c core.pager=sh log",
        "git -C /tmp/evil status",
        "git --no-pager log",
        "git log --output=x",
        "git -c alias.x=!id x",
    ] {
        assert_ne!(
            check(&format_action("bash", line), &readonly),
            Verdict::Allow,
            "{line}"
        );
    }
    assert_eq!(
        check(&format_action("bash", "git log --oneline -n 5"), &readonly),
        Verdict::Allow
    );
}
