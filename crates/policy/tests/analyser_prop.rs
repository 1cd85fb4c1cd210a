//! Property tests of the analysers (issue 23, item 12's fuzzing): details
//! built from the tokens the parsers recurse on and the attacks use. No
//! detail panics, overflows the (2 MiB) test thread's stack or takes long,
//! a hazard is never an allow, the canonical forms are fixed points, and
//! `check` and `decide` agree.
//!
//! `cargo test` runs a few hundred cases; `PROPTEST_CASES=100000` runs
//! more (the `cargo fuzz` target in `crates/policy/fuzz` is the long run).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use actiongate_policy::{
    Dialect, Profile, Request, Verdict, analyze, check, decide, format_action, get_preset,
};
use proptest::prelude::*;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const TOKENS: &[&str] = &[
    " ",
    " ",
    " ",
    "ls",
    "cat",
    "echo",
    "git",
    "push",
    "status",
    "log",
    "commit",
    "config",
    "-c",
    "-C",
    "--no-pager",
    "-m",
    "-v",
    "-R",
    "-x",
    "--exec",
    "core.pager=sh",
    "alias.x=!sh",
    "origin",
    "main",
    "'",
    "\"",
    "\\",
    "$",
    "$(",
    "`",
    "(",
    ")",
    "((",
    "))",
    "[[",
    "]]",
    "[",
    "]",
    "{",
    "}",
    "!",
    "&&",
    "||",
    "&",
    "|",
    ";",
    "\n",
    "<",
    ">",
    "&>",
    ">&",
    "<<<",
    "<<E\nx\nE\n",
    "$'",
    "${",
    "x",
    "a[",
    "$((",
    "=",
    ",",
    "..",
    "/dev/tcp/",
    "~",
    "*",
    "?",
    "#",
    "\t",
    "test",
    "-eq",
    "ext::",
    "é",
    "if",
    "then",
    "fi",
    "for",
    "do",
    "done",
    "case",
    "in",
    "esac",
    "let",
    "sh",
    "bash",
    "-n",
    "1",
];

fn detail() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..60).prop_map(|t| t.concat())
}

/// A long run of one or two tokens, as the stack-overflow reports had.
fn deep() -> impl Strategy<Value = String> {
    (
        prop::sample::select(TOKENS),
        prop::sample::select(TOKENS),
        1usize..4000,
        prop::sample::select(&["", "[[ ", "ls && [[ ", "$(( ", "echo "][..]),
    )
        .prop_map(|(a, b, n, prefix)| format!("{prefix}{}", format!("{a}{b}").repeat(n)))
}

fn profiles() -> &'static [Profile] {
    static P: OnceLock<Vec<Profile>> = OnceLock::new();
    P.get_or_init(|| {
        actiongate_policy::preset_names()
            .iter()
            .map(|n| get_preset(n).unwrap())
            .collect()
    })
}

/// The start of a detail, for messages.
fn head(detail: &str) -> String {
    detail.chars().take(120).collect()
}

fn judge_everything(detail: &str) {
    let shown = head(detail);
    let started = Instant::now();
    let open = get_preset("open").unwrap();
    for (tool, dialect) in [
        ("bash", Dialect::Bash),
        ("sh", Dialect::Sh),
        ("git", Dialect::Git),
    ] {
        let analysis = analyze(dialect, detail);
        let action = format_action(tool, detail);
        // A hazard is never an allow, even under `open`.
        if !analysis.is_clean() {
            assert_ne!(check(&action, &open), Verdict::Allow, "{tool} {shown:?}");
        }
        // A clean line's canonical commands read back as themselves.
        if analysis.is_clean() && dialect == Dialect::Git && analysis.commands.len() == 1 {
            let again = analyze(Dialect::Git, &analysis.commands[0]);
            assert_eq!(again.commands, analysis.commands, "{shown:?}");
        }
        // Under `standard`, no reading of a git line that pushes is allowed.
        if dialect == Dialect::Git && analysis.commands.iter().any(|c| c.starts_with("push")) {
            assert_ne!(
                check(&action, &get_preset("standard").unwrap()),
                Verdict::Allow,
                "{shown:?}"
            );
        }
        for p in profiles() {
            let d = decide(
                p,
                &[],
                &Request {
                    agent: "a",
                    tool,
                    detail,
                    permission: None,
                },
                actiongate_policy::chrono::Utc::now(),
            );
            assert_eq!(
                check(&action, p),
                d.verdict,
                "{tool} {shown:?}: {}",
                d.reason
            );
        }
    }
    // Generous: debug build, 3 dialects × 5 presets, a shared machine.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{shown:?} ({} bytes) took {:?}",
        detail.len(),
        started.elapsed()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn token_soup_is_judged_safely(d in detail()) {
        judge_everything(&d);
    }

    #[test]
    fn deep_runs_are_judged_safely(d in deep()) {
        judge_everything(&d);
    }

    #[test]
    fn arbitrary_text_is_judged_safely(d in "\\PC{0,200}") {
        judge_everything(&d);
    }
}

/// Found by `cargo fuzz`: the fast path and the full analysis disagreed on
/// a `-v` operand that is no valid name (and runs nothing).
#[test]
fn fuzz_findings_stay_fixed() {
    for d in [
        "test -v IOMedsrfe.ho set",
        "[ -v a.b ]",
        "[[ -v a.b ]]",
        // brush-parser unwrapped an i32 parse of the descriptor number.
        " $x\0 ls$; 999999999999999999999999>&touc\0P{\0\u{1}@}",
        "ls 99999999999>&x",
        "ls 99999999999<x",
        // brush-parser's tokenizer unwraps the end of input after a
        // here-document opened inside `$(…)`: caught, an unparsable line.
        "$(<<E)$(\nE",
        // brush-parser trimmed a here-document tag of a carriage return or
        // form feed to nothing and allocated without end.
        "a<<\r #",
        "''<<\u{c} #",
        "ls -la\r",
        // A here-document left open inside `$(`: gigabytes.
        "$(<<  $(",
        "nice\u{fffd}kn 4-c\u{fffd})] )cho) $([$(*touch pw<<  pndwhes-c\u{fffd})]ned )cho) $(( a[$(",
        "cCargo:\u{fffd}-$(at <<E)\0{x[ \u{fffd}f Cargo:\u{fffd}-$(toalias.x=!n\u{6}\nE",
    ] {
        judge_everything(d);
    }
    for d in [
        "$(<<E)$(\nE",
        "$(<<  $(",
        "a<<\r #",
        "''<<\u{c} #",
        "ls\u{b}",
    ] {
        let a = actiongate_policy::analyze_shell(d);
        assert!(
            a.hazards
                .iter()
                .any(|h| matches!(h, actiongate_policy::Hazard::Unparsable { .. })),
            "{d:?}: {a:?}"
        );
    }
}
