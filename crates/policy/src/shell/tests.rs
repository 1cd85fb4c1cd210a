#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use proptest::prelude::*;

fn via_parser(detail: &str) -> ShellAnalysis {
    let mut c = Collector::default();
    walk::analyze_program(detail, &mut c);
    c.finish()
}

fn via_fast(detail: &str) -> Option<ShellAnalysis> {
    let mut c = Collector::default();
    fast::analyze(detail, &mut c).then(|| c.finish())
}

const TOKENS: &[&str] = &[
    "ls",
    "-la",
    "git",
    "log",
    "status",
    "branch",
    "-D",
    "a=b",
    "x",
    "|",
    "||",
    " ",
    "  ",
    "if",
    "for",
    "time",
    "--output=f",
    "1",
    "%1",
    "rm",
    ":",
    "/bin/ls",
    ".",
    "./x",
    "eval",
    "sed",
    "-i",
    "echo",
    "@",
    "+x",
    ",",
    "=",
    "-",
    "env",
    "xargs",
    "sort",
    "-o",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// The shortcut for plain pipelines agrees with the full parser whenever
    /// it accepts an input.
    #[test]
    fn fast_path_agrees_with_parser(parts in prop::collection::vec(prop::sample::select(TOKENS), 0..10)) {
        let detail = parts.concat();
        if let Some(fast) = via_fast(&detail) {
            prop_assert_eq!(fast, via_parser(&detail), "detail {:?}", detail);
        }
    }

    /// A command `simple_hazard` takes is its own only simple command, as
    /// the full parser writes it, and has the parser's first hazard.
    #[test]
    fn simple_commands_agree_with_parser(parts in prop::collection::vec(prop::sample::select(TOKENS), 0..40)) {
        let detail = parts.concat();
        if let Some(hazard) = fast::simple_hazard(&detail) {
            let parsed = via_parser(&detail);
            prop_assert_eq!(&parsed.commands, &vec![detail.clone()], "detail {:?}", detail);
            prop_assert_eq!(hazard.as_ref(), parsed.hazards.first(), "detail {:?}", detail);
        }
    }
}

/// Command names of every kind the fast path tells apart.
const NAMES: &[&str] = &[
    "ls",
    "cat",
    "echo",
    "cargo",
    "git",
    "sed",
    "sort",
    "env",
    "xargs",
    "find",
    "tar",
    "tee",
    "python3",
    "eval",
    "set",
    "export",
    "let",
    "if",
    "time",
    "./x",
    "a=b",
    "x:y",
    "%1",
    "@",
    "readarray",
    "powershell",
    "checkout",
];

/// Arguments, some of them hazardous to some commands.
const ARGS: &[&str] = &[
    "-la",
    "src/a.rs",
    "-i",
    "-o",
    "--output=f",
    "-c",
    "-e",
    "push",
    "-exec",
    "rm",
    "-D",
    "a=b",
    "1",
    "-",
    "--",
    "/dev/null",
    "s/a/b/w",
    "-v",
    "x",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Long single commands (past the 24 words the fast path splits) of
    /// every kind of name: the fast path agrees with the parser.
    #[test]
    fn long_simple_commands_agree_with_parser(
        name in prop::sample::select(NAMES),
        args in prop::collection::vec(prop::sample::select(ARGS), 0..40),
    ) {
        let detail = std::iter::once(name).chain(args).collect::<Vec<_>>().join(" ");
        if let Some(hazard) = fast::simple_hazard(&detail) {
            let parsed = via_parser(&detail);
            prop_assert_eq!(&parsed.commands, &vec![detail.clone()], "detail {:?}", detail);
            prop_assert_eq!(hazard.as_ref(), parsed.hazards.first(), "detail {:?}", detail);
        }
    }
}

#[test]
fn simple_path_takes_single_canonical_commands_only() {
    for detail in [
        "ls",
        "ls -la src/a.rs",
        "git log --oneline -n 5",
        "sed -i x f",
        "./x",
    ] {
        assert!(fast::simple_hazard(detail).is_some(), "{detail:?}");
    }
    assert_eq!(
        fast::simple_hazard("sed -i s/a/b/ f"),
        Some(via_parser("sed -i s/a/b/ f").hazards.first().cloned())
    );
    assert!(fast::simple_hazard("sed -i s/a/b/ f").unwrap().is_some());
    // Only commands whose options are checked are split into words, and
    // only as many as fit on the stack.
    let longest = format!("git log{}", " a".repeat(22));
    assert_eq!(fast::simple_hazard(&longest), Some(None));
    let too_long = format!("git log{}", " a".repeat(23));
    let many = format!("ls{}", " a".repeat(500));
    assert_eq!(fast::simple_hazard(&many), Some(None));
    for detail in [
        "", " ls", "ls ", "ls  -la", "ls | wc", "A=1 ls", "if x", "ls;x", "ls 'a'", "ls *",
        &too_long,
    ] {
        assert!(fast::simple_hazard(detail).is_none(), "{detail:?}");
    }
}

#[test]
fn fast_path_takes_plain_pipelines_only() {
    assert!(via_fast("ls -la | head -5 | sort | wc -l").is_some());
    for detail in [
        "ls; rm", "ls && x", "ls || x", "A=1 ls", "ls $x", "ls > f", "if x", "ls\nx", "ls 'a'",
        "| ls", "ls |",
    ] {
        assert!(via_fast(detail).is_none(), "{detail:?}");
    }
}

#[test]
fn commands_are_cut_at_every_separator() {
    let a = analyze_shell("a 1; b 2 && c || d | e & f\ng");
    assert_eq!(a.commands, ["a 1", "b 2", "c", "d", "e", "f", "g"]);
    assert!(a.is_clean());
}

#[test]
fn compound_bodies_are_walked() {
    let a = analyze_shell(
        "if a; then b; elif c; then d; else e; fi; while f; do g; done; until h; do i; done",
    );
    assert_eq!(a.commands, ["a", "b", "c", "d", "e", "f", "g", "h", "i"]);
    let a = analyze_shell("for x in 1 2; do j; done; case y in z) k;; *) l;; esac; { m; }; (n)");
    assert_eq!(a.commands, ["j", "k", "l", "m", "n"]);
}

#[test]
fn substitutions_are_walked_and_flagged() {
    let a = analyze_shell("echo $(whoami) `id` <(date)");
    assert_eq!(a.commands, ["whoami", "id", "date", "echo $(whoami) `id`"]);
    assert!(a.hazards.contains(&Hazard::CommandSubstitution));
    assert!(a.hazards.contains(&Hazard::ProcessSubstitution));
}

#[test]
fn canonical_text_normalizes_quoting_and_spacing() {
    assert_eq!(analyze_shell("ls\t  -la   \"a\"").commands, ["ls -la a"]);
    assert_eq!(analyze_shell("sed '-i' x").commands, ["sed -i x"]);
    assert_eq!(
        analyze_shell("echo 'a b' \"c'd\"").commands,
        [r"echo 'a b' 'c'\''d'"]
    );
}

#[test]
fn quoted_options_are_still_seen() {
    let a = analyze_shell("sed \"-i\" s/a/b/ f");
    assert!(
        a.hazards
            .iter()
            .any(|h| matches!(h, Hazard::UnsafeOption { option, .. } if option == "-i"))
    );
    let a = analyze_shell("git branch '-D' x");
    assert!(!a.is_clean());
}

#[test]
fn safe_redirections_are_not_hazards() {
    for detail in [
        "ls 2>&1",
        "ls >/dev/null 2>/dev/null",
        "ls >&2",
        "cat <f",
        "ls 2>&-",
        "ls &>/dev/null",
        "cat <<'E'\n$(x)\nE",
    ] {
        assert!(
            analyze_shell(detail).is_clean(),
            "{detail:?}: {:?}",
            analyze_shell(detail)
        );
    }
}

#[test]
fn nesting_is_bounded() {
    let mut detail = String::from("ls");
    for _ in 0..20 {
        detail = format!("echo $({detail})");
    }
    assert!(analyze_shell(&detail).hazards.contains(&Hazard::TooDeep));
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    for detail in [
        format!("{}ls{}", "{ ".repeat(200), "; }".repeat(200)),
        format!("{}ls{}", "if true; then ".repeat(200), "; fi".repeat(200)),
        format!("{}ls{}", "(".repeat(200), ")".repeat(200)),
        format!("{}ls{}", "echo $(".repeat(200), ")".repeat(200)),
    ] {
        let a = analyze_shell(&detail);
        assert!(a.hazards.contains(&Hazard::TooDeep), "{:?}", a.hazards);
    }
    // Ordinary compound commands are well within the bound.
    assert!(analyze_shell("if a; then { (b); }; fi; for x in y; do c; done").is_clean());
}

#[test]
fn extended_test_arithmetic_is_a_hazard_only_with_variables() {
    assert!(analyze_shell("[[ -f x ]] && ls").is_clean());
    assert!(analyze_shell("[[ 1 -eq 1 ]]").is_clean());
    assert!(
        analyze_shell("[[ $x -eq 1 ]]")
            .hazards
            .contains(&Hazard::Arithmetic)
    );
}

#[test]
fn hazards_display_as_sentences() {
    let a = analyze_shell("ls > out.txt");
    assert_eq!(
        a.hazards[0].to_string(),
        "output is redirected to a file (`out.txt`)"
    );
}

/// The inputs cargo fuzz found allocating without end are refused before
/// the parser sees them; the check asks nothing of the parser, so this
/// fails (rather than exhausting memory) if the refusal goes.
#[test]
fn substitution_on_a_heredoc_line_is_refused_before_parsing() {
    for detail in [
        "<<<<<<lfahho$(  ",
        "[[ <<E$(  ",
        "cat <<E$(  ",
        "cat <<-E$[  ",
        "cat <<E $(x)\nx\nE",
        "cat <<E \"$(x\"",
        "cat <<'E' \\'$(  ",
        "cat <<E '$(x",
    ] {
        assert!(
            walk::substitution_after_heredoc_operator(detail),
            "{detail:?}"
        );
    }
    for detail in [
        "cat <<'E'\n$(x)\nE",
        "cat <<E\nx\nE\necho $(date)",
        "ls $(x)",
        "echo 'a <<< d $[1]'",
        "cat <<E'$(  '",
    ] {
        assert!(
            !walk::substitution_after_heredoc_operator(detail),
            "{detail:?}"
        );
    }
}

/// A control character a terminal acts on (erasing the line, ending it,
/// recalling history) makes a line unparsable, so it is never allowed as
/// the text reads without a terminal; tab and newline are plain.
#[test]
fn a_control_character_a_terminal_acts_on_is_a_hazard() {
    for line in [
        "echo hi\u{15}rm -rf x",
        "echo hi\rrm -rf x",
        "echo x\u{1b}[A",
        "echo hi\u{3}rm x",
        "ls\u{7f}\u{7f}rm x",
        "cat a\u{b}b",
        "cat a\u{c}b",
    ] {
        let a = analyze_shell(line);
        assert!(
            matches!(a.hazards.as_slice(), [Hazard::Unparsable { .. }]),
            "{line:?}: {a:?}"
        );
    }
    for line in ["echo a\tb", "ls\nls -l"] {
        let a = analyze_shell(line);
        assert!(a.hazards.is_empty(), "{line:?}: {a:?}");
    }
}

#[test]
fn a_line_that_may_run_a_command_more_than_once_says_so() {
    for line in [
        "for i in 1 2; do make x; done",
        "while true; do make x; done",
        "until false; do make x; done",
        "f() { make x; }; f; f",
        "for ((i = 0; i < 9; i++)); do make x; done",
        "ls && for i in a; do :; done",
    ] {
        assert!(analyze_shell(line).repeats, "{line}");
    }
    for line in [
        "make x; make x",
        "ls | wc -l",
        "if true; then make x; fi",
        "(make x)",
    ] {
        assert!(!analyze_shell(line).repeats, "{line}");
    }
}

#[test]
fn a_sed_script_given_any_way_getopt_reads_it_is_judged() {
    for line in [
        "sed --expression='1e rm -rf x' list",
        "sed --expr='1e rm -rf x' list",
        "sed --e='1e rm -rf x' list",
        "sed --expression '1e rm -rf x' list",
        "sed -e'1e rm -rf x' list",
        "sed -ne'1e rm -rf x' list",
        "sed -n -e '0~1e rm -rf x' list",
        "sed -n '/x/,+1e rm -rf x' list",
        "sed -n '0~1w out' list",
        "sed -si'' 's/a/b/' f",
    ] {
        let a = analyze_shell(line);
        assert!(
            a.hazards
                .iter()
                .any(|h| matches!(h, Hazard::UnsafeOption { .. })),
            "{line}: {a:?}"
        );
    }
    for line in [
        "sed -n 's/a/b/p' f",
        "sed --expression='s/a/b/g' f",
        "sed -ne '1,5p' f",
        "sed -E -e 's/x+/y/' f",
        "sed -l 5 -n l f",
    ] {
        let a = analyze_shell(line);
        assert!(a.hazards.is_empty(), "{line}: {a:?}");
    }
}
