//! Every file `docs/policy.md` says `standard` asks before writing is
//! asked for, and every near miss it lists stays allowed: the table is
//! read from the page, so the page and the preset cannot drift apart.

use actiongate_policy::{Verdict, check, get_preset};
use std::path::Path;

const SECTION: &str = "## Files `standard` asks before writing";

/// The backquoted examples of the first cell of each table row in the
/// section, as (example, whether the row is in the "stay allowed" table).
fn examples() -> Vec<(String, bool)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/policy.md");
    let text = std::fs::read_to_string(path).unwrap();
    let (_, section) = text
        .split_once(SECTION)
        .expect("the section is on the page");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut allowed = false;
    let mut out = Vec::new();
    for line in section.lines() {
        if line.starts_with("These stay allowed") {
            allowed = true;
        }
        let Some(cell) = line.strip_prefix("| `") else {
            continue;
        };
        let cell = cell.split(" |").next().unwrap_or_default();
        for example in format!("`{cell}").split(", ") {
            let example = example.trim_matches('`');
            assert!(!example.contains('`'), "one path per backquote: {line}");
            out.push((example.to_owned(), allowed));
        }
    }
    out
}

#[test]
fn the_documented_list_is_long_and_has_near_misses() {
    let all = examples();
    assert!(all.iter().filter(|(_, ok)| !ok).count() >= 120, "{all:?}");
    assert!(all.iter().filter(|(_, ok)| *ok).count() >= 8, "{all:?}");
}

#[test]
fn standard_asks_before_writing_each_documented_file() {
    let standard = get_preset("standard").unwrap();
    let mut wrong = Vec::new();
    for (example, allowed) in examples() {
        let want = if allowed {
            Verdict::Allow
        } else {
            Verdict::Ask
        };
        for verb in ["write", "edit", "create", "delete"] {
            let action = format!("tool:file:{verb} {example}");
            if check(&action, &standard) != want {
                wrong.push(format!("{action}: want {want:?}"));
            }
        }
        // A bare path, quoted, and with a drive-style prefix ask too.
        for action in [
            format!("tool:file:{example}"),
            format!("tool:file:write \"{example}\""),
        ] {
            if check(&action, &standard) != want {
                wrong.push(format!("{action}: want {want:?}"));
            }
        }
        // Viewing is always fine.
        let view = format!("tool:file:view {example}");
        if check(&view, &standard) != Verdict::Allow {
            wrong.push(format!("{view}: want Allow"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn case_does_not_hide_a_protected_file() {
    let standard = get_preset("standard").unwrap();
    for (example, allowed) in examples() {
        if allowed {
            continue;
        }
        let action = format!("tool:file:write {}", example.to_uppercase());
        assert_eq!(check(&action, &standard), Verdict::Ask, "{action}");
    }
}
