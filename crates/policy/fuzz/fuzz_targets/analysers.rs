//! Any detail, read by every analyser and judged under every preset:
//! libFuzzer reports a panic (but one in brush-parser, which the analysers
//! catch), a stack overflow (the script runs it with a small stack) or a
//! slow input (`-timeout`). A hazard must never be an
//! allow, `check` must agree with `decide`, commands hidden from the walk
//! (shown to deny patterns only) come only with a hazard, and `standard`'s
//! file rule, matched without backtracking, must agree with fancy-regex.

#![no_main]

use actiongate_policy::{
    Dialect, PatternSet, Request, SetMatch, Verdict, analyze, check, decide, format_action,
    get_preset, preset_names, preset_spec,
};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// `standard`'s file rule, through the pattern set and through fancy-regex.
fn file_rule() -> &'static (PatternSet, fancy_regex::Regex) {
    static RULE: OnceLock<(PatternSet, fancy_regex::Regex)> = OnceLock::new();
    RULE.get_or_init(|| {
        let spec = preset_spec("standard").expect("standard exists");
        let rule = spec
            .allow
            .iter()
            .find(|p| p.starts_with("tool:file(?!"))
            .expect("standard has a file rule")
            .clone();
        let set = PatternSet::new(std::slice::from_ref(&rule)).expect("compiles");
        let fancy = fancy_regex::RegexBuilder::new(&format!(r"\A(?:{rule})\z"))
            .backtrack_limit(10_000_000)
            .build()
            .expect("compiles");
        (set, fancy)
    })
}

/// libfuzzer-sys aborts on every panic, even one caught. brush-parser
/// panics on some inputs, and the analysers catch those (an unparsable
/// line, as in the daemon); any other panic still aborts here.
fn abort_on_panics_outside_the_parser() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        std::panic::set_hook(Box::new(|info| {
            let in_parser = info
                .location()
                .is_some_and(|l| l.file().contains("brush-parser"));
            if !in_parser {
                eprintln!("{info}");
                std::process::abort();
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    abort_on_panics_outside_the_parser();
    let detail = String::from_utf8_lossy(data);
    let now = actiongate_policy::chrono::Utc::now();
    for (tool, dialect) in [
        ("bash", Dialect::Bash),
        ("sh", Dialect::Sh),
        ("git", Dialect::Git),
    ] {
        let analysis = analyze(dialect, &detail);
        if !analysis.hidden.is_empty() {
            assert!(!analysis.is_clean(), "{tool}: hidden {:?}", analysis.hidden);
        }
        let action = format_action(tool, &detail);
        for name in preset_names() {
            let Ok(profile) = get_preset(name) else {
                continue;
            };
            let verdict = check(&action, &profile);
            if !analysis.is_clean() {
                assert_ne!(
                    verdict,
                    Verdict::Allow,
                    "{tool} {name}: {:?}",
                    analysis.hazards
                );
            }
            let req = Request {
                agent: "a",
                tool,
                detail: &detail,
                permission: None,
            };
            assert_eq!(
                verdict,
                decide(&profile, &[], &req, now).verdict,
                "{tool} {name}"
            );
        }
    }
    let (set, fancy) = file_rule();
    let action = format_action("file", &detail);
    if let Ok(expected) = fancy.is_match(&action) {
        let got = matches!(set.first_match(&action), SetMatch::Matched(_));
        assert_eq!(got, expected, "{action:?}");
    }
});
