//! Bounded analysis (issue 23, item 5): no detail of any size or nesting
//! stops the process, and a limit hit is an ask (or a deny), never an
//! allow.
//!
//! Every analysis here runs on a thread with a 2 MiB stack, the size of a
//! tokio worker's, in whatever profile the tests are built with (debug
//! frames are the larger ones).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use actiongate_policy::{
    Hazard, Request, Verdict, analyze_shell, check, decide, format_action, get_preset,
};
use std::time::{Duration, Instant};

/// The largest detail the API takes.
const API_MAX: usize = 64 * 1024;

/// Details built to nest or repeat the constructs the parsers recurse on,
/// each about `len` bytes long.
fn nasty(len: usize) -> Vec<(String, String)> {
    let rep = |unit: &str| unit.repeat(len / unit.len().max(1));
    let wrap = |open: &str, close: &str| {
        let n = len / (open.len() + close.len()).max(1);
        format!("{}x{}", open.repeat(n), close.repeat(n))
    };
    vec![
        ("bang in [[".into(), format!("[[ {}-n x ]]", rep("! "))),
        ("bang glued in [[".into(), format!("[[ {}-n x ]]", rep("!"))),
        ("and in [[".into(), format!("[[ -n x {}]]", rep("&& -n x "))),
        ("or in [[".into(), format!("[[ -n x {}]]", rep("|| -n x "))),
        ("parens in [[".into(), format!("[[ {} ]]", wrap("( ", " )"))),
        ("ls and [[".into(), format!("ls && [[ {}-v x ]]", rep("! "))),
        ("and chain".into(), format!("ls{}", rep(" && ls"))),
        ("pipe chain".into(), format!("ls{}", rep(" | ls"))),
        ("semicolons".into(), format!("ls{}", rep(";ls"))),
        ("bangs".into(), format!("{}ls", rep("! "))),
        ("arith parens".into(), wrap("((", "))")),
        ("arith word".into(), format!("echo $(({}1))", rep("-"))),
        ("arith not".into(), format!("echo $(({}1))", rep("!"))),
        ("cmd subst".into(), wrap("$(", ")")),
        ("backticks".into(), rep("`")),
        ("quoted subst".into(), wrap("\"$(", ")\"")),
        ("braces".into(), wrap("{ ", "; }")),
        ("subshells".into(), wrap("(", ")")),
        ("param default".into(), wrap("${x:-", "}")),
        ("subscripts".into(), wrap("${a[", "]}")),
        ("ifs".into(), wrap("if true; then ", "; fi")),
        ("whiles".into(), wrap("while true; do ", "; done")),
        ("process subst".into(), wrap("cat <(", ")")),
        ("heredocs".into(), rep("cat <<E\nx\nE\n")),
        ("quotes".into(), rep("'a'\"b\"")),
        ("escapes".into(), rep("\\")),
        ("dollar quotes".into(), rep("$'\\x41'")),
        ("test cmd".into(), format!("test {}-n x", rep("! "))),
        ("bracket cmd".into(), format!("[ {}-n x ]", rep("( "))),
        ("words".into(), rep("a ")),
        ("one word".into(), rep("a")),
        ("git global".into(), rep("-C . ")),
        ("newlines".into(), rep("ls\n")),
        ("case".into(), wrap("case x in x) ", ";; esac")),
        ("extglob".into(), wrap("ls @(", ")")),
        ("assignments".into(), rep("a=1 ")),
        ("arrays".into(), wrap("a=(", ")")),
        // Found by the property tests: `$[` nests without bound (a stack
        // overflow) and `[`, stray `)` and redirections took the parser
        // more than linear time.
        ("dollar brackets".into(), wrap("echo $[", "]")),
        ("brackets".into(), format!("echo {}", rep("a["))),
        ("close parens".into(), format!("echo {}", rep("x)"))),
        ("redirects".into(), format!("echo {}", rep("x>"))),
    ]
}

/// Whether a detail of [`nasty`] is a plain repetition that may be
/// allowed: one that fits the limits.
fn benign(name: &str, detail: &str) -> bool {
    [
        "and chain",
        "pipe chain",
        "semicolons",
        "words",
        "one word",
        "newlines",
        "quotes",
        "bangs",
        "heredocs",
        "test cmd",
        "git global",
    ]
    .contains(&name)
        && detail.len() <= actiongate_policy::MAX_LEN
}

/// Runs `f` on a 2 MiB stack; panics (failing the test) if it overflows,
/// which aborts the test binary instead.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn no_detail_overflows_the_stack_or_is_allowed() {
    on_small_stack(|| {
        let open = get_preset("open").unwrap();
        let readonly = get_preset("readonly").unwrap();
        for len in [1_000, 5_000, API_MAX] {
            for (name, detail) in nasty(len) {
                let benign = benign(&name, &detail);
                let started = Instant::now();
                for tool in ["bash", "sh", "git"] {
                    let action = format_action(tool, &detail);
                    for profile in [&open, &readonly] {
                        let verdict = check(&action, profile);
                        assert!(
                            benign || verdict != Verdict::Allow,
                            "{name} ({len} bytes) allowed for {tool}"
                        );
                    }
                    let d = decide(
                        &open,
                        &[],
                        &Request {
                            agent: "a",
                            tool,
                            detail: &detail,
                            permission: None,
                        },
                        actiongate_policy::chrono::Utc::now(),
                    );
                    assert!(
                        benign || d.verdict != Verdict::Allow,
                        "{name} ({len}): {}",
                        d.reason
                    );
                }
                let _ = analyze_shell(&detail);
                // Generous for debug builds on a shared machine.
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "{name} ({len} bytes) took {:?}",
                    started.elapsed()
                );
            }
        }
    });
}

#[test]
fn a_limit_hit_is_named_in_the_reason() {
    on_small_stack(|| {
        let detail = format!("[[ {}-n x ]]", "! ".repeat(3000));
        let d = decide(
            &get_preset("open").unwrap(),
            &[],
            &Request {
                agent: "a",
                tool: "bash",
                detail: &detail,
                permission: None,
            },
            actiongate_policy::chrono::Utc::now(),
        );
        assert_eq!(d.verdict, Verdict::Ask, "{}", d.reason);
        assert!(d.reason.contains("too deeply"), "{}", d.reason);
        let long = format!("ls {}", "a ".repeat(API_MAX / 2));
        let d = decide(
            &get_preset("open").unwrap(),
            &[],
            &Request {
                agent: "a",
                tool: "bash",
                detail: &long,
                permission: None,
            },
            actiongate_policy::chrono::Utc::now(),
        );
        assert_eq!(d.verdict, Verdict::Ask, "{}", d.reason);
        assert!(d.reason.contains("too long"), "{}", d.reason);
    });
}

/// The same details as a handler's command line (the reference executor's
/// `execute_command`, scope `{"command": …}`), which issue 23 found
/// crashing the daemon through a handler's command param and
/// `/v1/permissions/check` too: judged by the profile and by a command
/// grant, on a worker-sized stack, never allowed.
#[test]
fn a_nested_command_in_a_handler_scope_is_bounded_too() {
    use actiongate_policy::{Grant, GrantTarget, PermissionRef};
    on_small_stack(|| {
        let open = get_preset("open").unwrap();
        let scope_of = |line: &str| {
            let mut m = serde_json::Map::new();
            m.insert("command".into(), line.into());
            m
        };
        let grant = Grant {
            id: "g".into(),
            agent: None,
            target: GrantTarget::Permission {
                handler: "fs".into(),
                permission: "shell.exec".into(),
                scope: scope_of("*"),
            },
            expires_at: None,
            revoked_at: None,
        };
        let now = actiongate_policy::chrono::Utc::now();
        for (name, line) in [5_000, API_MAX].into_iter().flat_map(nasty) {
            let scope = scope_of(&line);
            let detail = format!("execute_command {line}");
            let req = Request {
                agent: "a",
                tool: "fs",
                detail: &detail,
                permission: Some(PermissionRef {
                    handler: "fs",
                    permission: "shell.exec",
                    scope: &scope,
                    call: None,
                }),
            };
            let started = Instant::now();
            let covered = grant.covers(&req, now);
            let d = decide(&open, std::slice::from_ref(&grant), &req, now);
            if !benign(&name, &line) {
                assert!(!covered, "{name}");
                assert_ne!(d.verdict, Verdict::Allow, "{name}: {}", d.reason);
            }
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{name} took {:?}",
                started.elapsed()
            );
        }
    });
}

/// brush-parser takes time exponential in the `(` it has open at a syntax
/// error: cargo fuzz found `l&` + 29 `(` + `s >d`, 36 bytes that took
/// seconds, under the opener bound. Deeper than `MAX_PAREN_DEPTH` is a
/// limit hit before parsing.
#[test]
fn unclosed_parentheses_are_refused_before_parsing() {
    on_small_stack(|| {
        let open = get_preset("open").unwrap();
        for n in 9..=31 {
            for detail in [
                format!("l&{}s >d", "(".repeat(n)),
                format!("{}s", "( ".repeat(n)),
                format!("{}s", "( ( ( a\n".repeat(n / 3 + 1)),
            ] {
                let started = Instant::now();
                let a = analyze_shell(&detail);
                assert!(a.hazards.contains(&Hazard::TooDeep), "{detail:?}: {a:?}");
                let d = decide(
                    &open,
                    &[],
                    &Request {
                        agent: "a",
                        tool: "sh",
                        detail: &detail,
                        permission: None,
                    },
                    actiongate_policy::chrono::Utc::now(),
                );
                assert_ne!(d.verdict, Verdict::Allow, "{detail:?}");
                // Seconds before, for n = 29; generous for debug builds.
                assert!(
                    started.elapsed() < Duration::from_secs(1),
                    "{detail:?} took {:?}",
                    started.elapsed()
                );
            }
        }
    });
}

/// brush-parser's word parser takes time exponential in how deep
/// subscripted expansions nest: cargo fuzz found a here-document of
/// unclosed `${x[` lines (84 bytes, seconds); seven nested take minutes,
/// whether closed, unclosed, or "closed" by a `}` inside the subscript.
#[test]
fn nested_subscripted_expansions_are_refused_before_parsing() {
    on_small_stack(|| {
        let open = get_preset("open").unwrap();
        for n in 3..=8 {
            for detail in [
                format!("cat <<E\n{}E", "${x[ a\n".repeat(n)),
                format!("echo {}1{}", "${x[".repeat(n), "]}".repeat(n)),
                format!("echo {}", "${x[ }".repeat(n)),
                format!("cat <<E\n{}\nE", "a}${x[ ".repeat(n)),
                format!("echo {}1{}", "a[${x[".repeat(n), "]}".repeat(n)),
                format!("echo {}", "${a[0]} ".repeat(n)),
            ] {
                let started = Instant::now();
                let a = analyze_shell(&detail);
                assert!(a.hazards.contains(&Hazard::TooDeep), "{detail:?}: {a:?}");
                let verdict = check(&format_action("bash", &detail), &open);
                assert_ne!(verdict, Verdict::Allow, "{detail:?}");
                // Seconds to minutes before; generous for debug builds.
                assert!(
                    started.elapsed() < Duration::from_secs(1),
                    "{detail:?} took {:?}",
                    started.elapsed()
                );
            }
        }
    });
}

/// A here-document body is checked without the word parser, which took
/// time exponential in what a body leaves open: cargo fuzz found this
/// 40-byte start of a body taking milliseconds, and half a second with
/// 14 KiB after it.
#[test]
fn here_document_bodies_are_checked_in_linear_time() {
    on_small_stack(|| {
        let open = get_preset("open").unwrap();
        let start = "<<E\n$(\"\"($((($((${[()`<<${xnn$\u{fffd}-$(t\u{1e}hnw ";
        for words in [0, 100, 7_000] {
            let detail = format!("{start}{}\nE", "a ".repeat(words));
            let started = Instant::now();
            for tool in ["bash", "sh", "git"] {
                let verdict = check(&format_action(tool, &detail), &open);
                assert_ne!(verdict, Verdict::Allow, "{tool} {words}");
            }
            assert!(!analyze_shell(&detail).is_clean());
            // Half a second a dialect before; generous for debug builds.
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{words} words took {:?}",
                started.elapsed()
            );
        }
    });
}

/// One or two subscripts side by side, and a plain expansion inside one,
/// are still parsed.
#[test]
fn subscripts_side_by_side_are_parsed() {
    for detail in [
        "echo ${a[0]} ${a[1]}",
        "echo ${a[${i}]}",
        "echo ${x[1]:-${y}}",
    ] {
        let a = analyze_shell(detail);
        assert!(!a.hazards.contains(&Hazard::TooDeep), "{detail}: {a:?}");
    }
}

/// Parentheses nested as deep as ordinary commands go are still parsed.
#[test]
fn nested_parentheses_up_to_the_bound_are_parsed() {
    let nested = format!("{}ls{}", "(ls; ".repeat(8), " )".repeat(8));
    assert!(
        analyze_shell(&nested).is_clean(),
        "{:?}",
        analyze_shell(&nested)
    );
    let deep = format!("echo $(( {}1{} ))", "(".repeat(6), ")".repeat(6));
    assert!(!analyze_shell(&deep).hazards.contains(&Hazard::TooDeep));
}

/// Short commands far from every limit are still judged normally.
#[test]
fn ordinary_commands_stay_under_the_limits() {
    let readonly = get_preset("readonly").unwrap();
    let chain = vec!["ls -la"; 20].join(" && ");
    assert_eq!(
        check(&format_action("bash", &chain), &readonly),
        Verdict::Allow
    );
    let test = "[[ -f a && ! -d b || ( -e c ) ]] && ls";
    assert!(analyze_shell(test).is_clean(), "{:?}", analyze_shell(test));
}

/// Thousands of commands took the parser tens of milliseconds; more than
/// `MAX_SEPARATORS` separators are refused before parsing.
#[test]
fn many_commands_are_refused_quickly() {
    let open = get_preset("open").unwrap();
    for unit in ["x;", "x\n", "x&", "x|"] {
        let detail = unit.repeat(8000);
        let started = Instant::now();
        let d = decide(
            &open,
            &[],
            &Request {
                agent: "a",
                tool: "bash",
                detail: &detail,
                permission: None,
            },
            actiongate_policy::chrono::Utc::now(),
        );
        let took = started.elapsed();
        assert_ne!(d.verdict, Verdict::Allow, "{unit:?}: {}", d.reason);
        // A multi-line detail matches no `.*` as a whole: denied.
        if !unit.contains('\n') {
            assert!(d.reason.contains("too long"), "{unit:?}: {}", d.reason);
        }
        assert!(took < Duration::from_millis(50), "{unit:?} took {took:?}");
    }
    // Under the bound, a long list is still judged command by command.
    let list = "ls;".repeat(actiongate_policy::MAX_SEPARATORS);
    assert_eq!(
        analyze_shell(&list).commands.len(),
        actiongate_policy::MAX_SEPARATORS
    );
}

/// cargo fuzz found these making the parser allocate gigabytes (a
/// substitution left open in a here-document's tag); every dialect
/// refuses them at once and none is allowed.
#[test]
fn an_open_substitution_in_a_heredoc_tag_is_refused() {
    on_small_stack(|| {
        let open = get_preset("open").unwrap();
        for detail in [
            "<<<<<<lfahho$(  ",
            "[[ <<E$(  ",
            "cat <<E$(  ",
            "cat <<-E$[  ",
        ] {
            for tool in ["bash", "sh", "git"] {
                let verdict = check(&format_action(tool, detail), &open);
                assert_ne!(verdict, Verdict::Allow, "{tool} {detail:?}");
            }
            let a = analyze_shell(detail);
            assert!(
                a.hazards
                    .iter()
                    .any(|h| matches!(h, Hazard::Unparsable { .. })),
                "{detail:?}: {a:?}"
            );
        }
    });
}
