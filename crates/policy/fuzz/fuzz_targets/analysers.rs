//! Any detail, read by every analyser and judged under every preset:
//! libFuzzer reports a panic, a stack overflow (the script runs it with a
//! small stack) or a slow input (`-timeout`). A hazard must never be an
//! allow, and `check` must agree with `decide`.

#![no_main]

use actiongate_policy::{
    Dialect, Request, Verdict, analyze, check, decide, format_action, get_preset, preset_names,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let detail = String::from_utf8_lossy(data);
    let now = actiongate_policy::chrono::Utc::now();
    for (tool, dialect) in [
        ("bash", Dialect::Bash),
        ("sh", Dialect::Sh),
        ("git", Dialect::Git),
    ] {
        let analysis = analyze(dialect, &detail);
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
});
