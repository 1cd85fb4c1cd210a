//! Seed 001's "Tests to Write First", under the names the seed gives them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use actiongate_policy::{
    CustomProfile, ListKind, Profile, ProfileError, ProfileSpec, Verdict, check, format_action,
    get_preset, preset_spec, split_action,
};
use serde_json::json;

fn profile(allow: &[&str], ask: &[&str]) -> Profile {
    Profile::custom(CustomProfile {
        allow: allow.iter().map(|s| (*s).to_owned()).collect(),
        ask: ask.iter().map(|s| (*s).to_owned()).collect(),
        deny: vec![],
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

fn preset(name: &str) -> Profile {
    get_preset(name).unwrap()
}

// Core matching logic

#[test]
fn test_check_allow_matches_first() {
    let p = profile(&["tool:file:.*"], &["tool:.*"]);
    assert_eq!(check("tool:file:create /a.py", &p), Verdict::Allow);
}

#[test]
fn test_check_ask_matches_when_allow_does_not() {
    let p = profile(&["tool:file:view.*"], &["tool:file:.*"]);
    assert_eq!(check("tool:file:create /a.py", &p), Verdict::Ask);
    assert_eq!(check("tool:file:view /a.py", &p), Verdict::Allow);
}

#[test]
fn test_check_deny_when_nothing_matches() {
    let p = profile(&["tool:file:.*"], &["tool:git:.*"]);
    assert_eq!(check("tool:self_edit:system_prompt", &p), Verdict::Deny);
}

#[test]
fn test_check_allow_takes_priority_over_ask_for_same_pattern() {
    let p = profile(&["tool:git:.*"], &["tool:git:.*"]);
    assert_eq!(check("tool:git:commit -m x", &p), Verdict::Allow);
}

#[test]
fn test_check_empty_allow_and_ask_denies_everything() {
    let p = profile(&[], &[]);
    for action in [
        "tool:file:view /a",
        "tool:bash:ls",
        "tool:git:status",
        "",
        "anything",
    ] {
        assert_eq!(check(action, &p), Verdict::Deny, "{action:?}");
    }
}

#[test]
fn test_check_full_action_string_format() {
    // Patterns match the whole action string, never a part of it.
    let p = profile(&["tool:file:.*"], &[]);
    assert_eq!(check("tool:file:create /a", &p), Verdict::Allow);
    assert_eq!(check("tool:file_evil:hack", &p), Verdict::Deny);
    assert_eq!(check("xtool:file:create /a", &p), Verdict::Deny);
    let partial = profile(&["file:.*"], &[]);
    assert_eq!(check("tool:file:create /a", &partial), Verdict::Deny);
}

// Built-in presets

#[test]
fn test_preset_open_allows_everything() {
    let p = preset("open");
    for action in [
        "tool:file:create /a",
        "tool:git:push origin main",
        "tool:self_edit:system_prompt",
        "tool:x:",
    ] {
        assert_eq!(check(action, &p), Verdict::Allow, "{action:?}");
    }
}

#[test]
fn test_preset_open_allows_bash_rm() {
    assert_eq!(check("tool:bash:rm -rf /", &preset("open")), Verdict::Allow);
}

#[test]
fn test_preset_standard_allows_file_create() {
    assert_eq!(
        check("tool:file:create /src/app.py", &preset("standard")),
        Verdict::Allow
    );
}

#[test]
fn test_preset_standard_allows_file_view() {
    assert_eq!(
        check("tool:file:view /src/app.py", &preset("standard")),
        Verdict::Allow
    );
}

#[test]
fn test_preset_standard_asks_bash() {
    assert_eq!(
        check("tool:bash:pip install requests", &preset("standard")),
        Verdict::Ask
    );
}

#[test]
fn test_preset_standard_asks_git_push() {
    assert_eq!(
        check("tool:git:push origin main", &preset("standard")),
        Verdict::Ask
    );
    assert_eq!(check("tool:git:push", &preset("standard")), Verdict::Ask);
}

#[test]
fn test_preset_standard_allows_git_commit() {
    assert_eq!(
        check("tool:git:commit -m 'fix'", &preset("standard")),
        Verdict::Allow
    );
}

#[test]
fn test_preset_standard_denies_self_edit_system_prompt() {
    assert_eq!(
        check("tool:self_edit:system_prompt", &preset("standard")),
        Verdict::Deny
    );
}

#[test]
fn test_preset_locked_allows_file_view() {
    assert_eq!(
        check("tool:file:view /src/app.py", &preset("locked")),
        Verdict::Allow
    );
}

#[test]
fn test_preset_locked_denies_file_create() {
    assert_eq!(
        check("tool:file:create /src/app.py", &preset("locked")),
        Verdict::Deny
    );
}

#[test]
fn test_preset_locked_denies_bash() {
    assert_eq!(check("tool:bash:ls", &preset("locked")), Verdict::Deny);
}

#[test]
fn test_preset_locked_denies_git_push() {
    assert_eq!(
        check("tool:git:push origin main", &preset("locked")),
        Verdict::Deny
    );
}

#[test]
fn test_get_preset_returns_correct_profile() {
    let standard = preset("standard");
    assert_eq!(standard.spec(), &ProfileSpec::Preset("standard".into()));
    let lists = preset_spec("standard").unwrap();
    assert_eq!(lists.allow.len(), 4);
    assert_eq!(lists.allow[0], r"tool:file:view\s.*");
    assert!(lists.allow[1].starts_with("tool:file(?!"), "{lists:?}");
    assert_eq!(lists.allow[2], "tool:git:(?!push).*");
    // The executor's reads, but for actiongate's own secrets.
    assert!(
        lists.allow[3].starts_with("tool:fs(?!.*") && lists.allow[3].ends_with("):read_file .*"),
        "{lists:?}"
    );
    assert_eq!(
        lists.ask,
        [
            "tool:file:.*",
            "tool:bash:.*",
            "tool:git:push.*",
            "tool:fs:.*"
        ]
    );
    assert_eq!(
        standard.list(ListKind::Allow).patterns(),
        lists.allow.as_slice()
    );
    assert_eq!(preset_spec("open").unwrap().allow, [".*"]);
    assert_eq!(preset_spec("locked").unwrap().allow, ["tool:file:view.*"]);
    assert!(preset_spec("locked").unwrap().ask.is_empty());
}

#[test]
fn test_get_preset_raises_on_unknown_name() {
    let err = get_preset("permissive").unwrap_err();
    assert_eq!(err.name, "permissive");
    assert!(
        err.to_string()
            .contains("open, standard, locked, guarded, readonly"),
        "{err}"
    );
    let from_spec = Profile::from_spec(ProfileSpec::Preset("permissive".into())).unwrap_err();
    assert!(matches!(from_spec, ProfileError::UnknownPreset(_)));
}

// Pattern specificity

#[test]
fn test_specific_allow_overrides_broad_ask() {
    let p = profile(&["tool:bash:git status"], &["tool:bash:.*"]);
    assert_eq!(check("tool:bash:git status", &p), Verdict::Allow);
    assert_eq!(check("tool:bash:git push", &p), Verdict::Ask);
}

#[test]
fn test_regex_special_chars_in_action_handled() {
    let p = profile(&[r"tool:file:view /a\.txt"], &[]);
    assert_eq!(check("tool:file:view /a.txt", &p), Verdict::Allow);
    assert_eq!(check("tool:file:view /aXtxt", &p), Verdict::Deny);
    let any = profile(&["tool:file:.*"], &[]);
    assert_eq!(
        check(r"tool:file:view (a)[b]{c}*+?|^$\.", &any),
        Verdict::Allow
    );
}

#[test]
fn test_multiline_action_string_not_matched_across_lines() {
    let p = profile(&["tool:file:view.*"], &[]);
    assert_eq!(
        check("tool:file:view a\ntool:bash:rm -rf /", &p),
        Verdict::Deny
    );
    assert_eq!(check("tool:file:view a", &p), Verdict::Allow);
}

// Edge cases

#[test]
fn test_action_string_with_colons_in_detail() {
    let p = profile(&["tool:file:view .*"], &[]);
    assert_eq!(check("tool:file:view c:/x:y", &p), Verdict::Allow);
    assert_eq!(
        split_action("tool:file:view c:/x:y"),
        Some(("file", "view c:/x:y"))
    );
}

#[test]
fn test_empty_detail_string() {
    assert_eq!(format_action("file", ""), "tool:file:");
    assert_eq!(
        check("tool:file:", &profile(&["tool:file:.*"], &[])),
        Verdict::Allow
    );
    assert_eq!(check("tool:file:", &preset("locked")), Verdict::Deny);
    // An empty shell command runs nothing, but is not waved through either.
    assert_eq!(check("tool:bash:", &preset("readonly")), Verdict::Ask);
}

#[test]
fn test_format_action_produces_correct_string() {
    assert_eq!(
        format_action("bash", "pip install requests"),
        "tool:bash:pip install requests"
    );
    assert_eq!(
        format_action("self_edit", "system_prompt"),
        "tool:self_edit:system_prompt"
    );
    assert_eq!(format_action("file", "a:b"), "tool:file:a:b");
}

#[test]
fn test_invalid_regex_raises_at_construction() {
    let err = Profile::custom(CustomProfile {
        allow: vec!["tool:file:.*".into(), "tool:(bash".into()],
        ask: vec![],
        deny: vec![],
        shell_tools: vec![],
        approvals: vec![],
        examples: Default::default(),
        max_per_hour: None,
        rule_limits: Vec::new(),
        taints: Vec::new(),
        guarded: Vec::new(),
    })
    .unwrap_err();
    assert!(
        matches!(&err, ProfileError::InvalidPattern { list: ListKind::Allow, index: 1, pattern, .. } if pattern == "tool:(bash"),
        "{err:?}"
    );
    let from_json: Result<Profile, _> =
        serde_json::from_value(json!({"allow": [], "ask": ["[z-a]"]}));
    let message = from_json.unwrap_err().to_string();
    assert!(
        message.contains("ask") && message.contains("[z-a]"),
        "{message}"
    );
}

#[test]
fn test_profile_compiles_patterns_once() {
    // The compiled matchers live in the profile and are shared by clones;
    // checking never compiles anything (it has no error path for it).
    let p = profile(&["tool:file:.*", "tool:git:(?!push).*"], &["tool:bash:.*"]);
    let clone = p.clone();
    assert!(std::ptr::eq(
        p.list(ListKind::Allow),
        clone.list(ListKind::Allow)
    ));
    let a = get_preset("standard").unwrap();
    let b = get_preset("standard").unwrap();
    assert!(std::ptr::eq(a.list(ListKind::Ask), b.list(ListKind::Ask)));
    for _ in 0..1000 {
        assert_eq!(check("tool:git:status", &p), Verdict::Allow);
    }
}

#[test]
fn compiled_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + Clone + std::fmt::Debug>() {}
    assert_send_sync::<Profile>();
    assert_send_sync::<actiongate_policy::ToolPattern>();
    assert_send_sync::<actiongate_policy::Grant>();
}

#[test]
fn test_profile_serialization_to_dict() {
    let p = profile(&["tool:file:.*"], &["tool:bash:.*"]);
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        json!({"allow": ["tool:file:.*"], "ask": ["tool:bash:.*"], "deny": [],
               "taints": [], "guarded": []})
    );
    assert_eq!(
        serde_json::to_value(preset("standard")).unwrap(),
        json!("standard")
    );
    let with_shell = Profile::custom(CustomProfile {
        allow: vec![],
        ask: vec![],
        deny: vec!["tool:x:.*".into()],
        shell_tools: vec!["Bash".into()],
        approvals: vec![],
        examples: Default::default(),
        max_per_hour: None,
        rule_limits: Vec::new(),
        taints: Vec::new(),
        guarded: Vec::new(),
    })
    .unwrap();
    assert_eq!(
        serde_json::to_value(&with_shell).unwrap(),
        json!({"allow": [], "ask": [], "deny": ["tool:x:.*"], "shell_tools": ["Bash"],
               "taints": [], "guarded": []})
    );
}

#[test]
fn test_profile_deserialization_from_dict() {
    let p: Profile =
        serde_json::from_value(json!({"allow": ["tool:file:.*"], "ask": ["tool:bash:.*"]}))
            .unwrap();
    assert_eq!(check("tool:file:x", &p), Verdict::Allow);
    assert_eq!(check("tool:bash:make", &p), Verdict::Ask);
    assert!(p.list(ListKind::Deny).is_empty());
    let round: Profile = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
    assert_eq!(round, p);
    let standard: Profile = serde_json::from_value(json!("standard")).unwrap();
    assert_eq!(standard, preset("standard"));
    assert!(serde_json::from_value::<Profile>(json!("nope")).is_err());
    assert!(
        serde_json::from_value::<Profile>(json!({"allow": [], "ask": [], "extra": 1})).is_err()
    );
}
