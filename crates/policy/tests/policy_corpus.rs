//! The bypass corpus of `tests/policy/*.json` (issue 23, item 12) against
//! the policy crate: every entry's verdict from `check` and `decide`, and
//! the allowed `bash` and `sh` lines run in a scratch directory under bash
//! and dash to show that they run nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use actiongate_policy::{Profile, ProfileSpec, Request, Verdict, check, decide, format_action};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Entry {
    file: String,
    profile: String,
    tool: String,
    detail: String,
    expect: Verdict,
    run: bool,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/policy")
}

/// Every entry, and the profiles they name.
fn load() -> (Vec<Entry>, BTreeMap<String, Profile>) {
    let mut entries = Vec::new();
    let mut profiles = BTreeMap::new();
    for name in actiongate_policy::preset_names() {
        profiles.insert(
            (*name).to_owned(),
            actiongate_policy::get_preset(name).unwrap(),
        );
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        for (name, spec) in doc["profiles"].as_object().unwrap() {
            let spec: ProfileSpec = serde_json::from_value(spec.clone()).unwrap();
            let old = profiles.insert(name.clone(), Profile::from_spec(spec).unwrap());
            assert!(old.is_none(), "{file}: profile {name} defined twice");
        }
        for e in doc["entries"].as_array().unwrap() {
            let s = |k: &str| {
                e[k].as_str()
                    .unwrap_or_else(|| panic!("{file}: {e} lacks {k}"))
            };
            let expect = match s("expect") {
                "allow" => Verdict::Allow,
                "ask" => Verdict::Ask,
                "deny" => Verdict::Deny,
                other => panic!("{file}: bad expect {other}"),
            };
            entries.push(Entry {
                file: file.clone(),
                profile: s("profile").to_owned(),
                tool: s("tool").to_owned(),
                detail: s("detail").to_owned(),
                expect,
                run: e["run"].as_bool().unwrap_or(true),
            });
        }
    }
    (entries, profiles)
}

#[test]
fn the_corpus_is_big_and_covers_every_analyser() {
    let (entries, _) = load();
    assert!(entries.len() >= 200, "{} entries", entries.len());
    for tool in ["bash", "sh", "git"] {
        let n = entries.iter().filter(|e| e.tool == tool).count();
        assert!(n >= 30, "{n} {tool} entries");
    }
    let readonly = entries.iter().filter(|e| e.profile == "readonly").count();
    assert!(readonly >= 50, "{readonly} readonly entries");
}

#[test]
fn every_entry_gets_its_expected_verdict() {
    let (entries, profiles) = load();
    let now = actiongate_policy::chrono::Utc::now();
    let mut failures = Vec::new();
    for e in &entries {
        let profile = profiles
            .get(&e.profile)
            .unwrap_or_else(|| panic!("{}: unknown profile {}", e.file, e.profile));
        let checked = check(&format_action(&e.tool, &e.detail), profile);
        let decided = decide(
            profile,
            &[],
            &Request {
                agent: "a",
                tool: &e.tool,
                detail: &e.detail,
                permission: None,
            },
            now,
        );
        if checked != e.expect || decided.verdict != e.expect {
            failures.push(format!(
                "{} {} {} {:?}: expected {}, check {}, decide {} ({})",
                e.file,
                e.profile,
                e.tool,
                e.detail,
                e.expect,
                checked,
                decided.verdict,
                decided.reason
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Programs a corpus attack runs; each leaves a marker if it runs.
const CANARIES: &[&str] = &[
    "touch", "id", "rm", "curl", "wget", "nc", "python3", "perl", "ssh", "x.sh",
];

/// A scratch directory with a few files and a `bin` of canaries.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn main() {}\n").unwrap();
    let bin = root.join(".canary-bin");
    std::fs::create_dir(&bin).unwrap();
    for name in CANARIES {
        let path = bin.join(name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\n: > \"$CANARY_DIR/CANARY-{name}\"\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir(root.join(".canary")).unwrap();
    dir
}

/// Every file under `root` with its length, canaries' own files aside.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            if path.ends_with(".canary-bin") {
                continue;
            }
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            out.insert(path.strip_prefix(root).unwrap().to_path_buf(), meta.len());
        }
    }
    out
}

/// Runs `line` with `shell -c` in a fresh scratch directory; the files it
/// created or changed (canary markers included), or `None` if it did not
/// finish in time.
fn effects(shell: &str, line: &str) -> Option<Vec<String>> {
    let dir = scratch();
    let root = dir.path();
    let before = snapshot(root);
    let path = format!(
        "{}:{}",
        root.join(".canary-bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new(shell)
        .arg("-c")
        .arg(line)
        .current_dir(root)
        .env("PATH", path)
        .env("CANARY_DIR", root.join(".canary"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let after = snapshot(root);
    let mut changed: Vec<String> = after
        .iter()
        .filter(|(p, len)| before.get(*p) != Some(len))
        .map(|(p, _)| p.display().to_string())
        .collect();
    changed.extend(
        before
            .keys()
            .filter(|p| !after.contains_key(*p))
            .map(|p| format!("removed {}", p.display())),
    );
    Some(changed)
}

fn have(shell: &str) -> bool {
    Command::new(shell)
        .args(["-c", "exit 0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The markers work: an attack line does leave one, under both shells.
#[test]
fn the_scratch_run_sees_what_an_attack_does() {
    for shell in ["bash", "dash"] {
        if !have(shell) {
            eprintln!("{shell} is missing; skipped");
            continue;
        }
        let changed = effects(shell, "ls; touch pwned").unwrap();
        assert!(
            changed.iter().any(|c| c.contains("CANARY-touch")),
            "{changed:?}"
        );
        let changed = effects(shell, "echo x > out").unwrap();
        assert_eq!(changed, ["out"]);
    }
    if have("dash") {
        // The line readonly would allow for bash but dash reads otherwise.
        let changed = effects("dash", "echo hi &>/dev/null touch pwned").unwrap();
        assert!(
            changed.iter().any(|c| c.contains("CANARY-touch")),
            "{changed:?}"
        );
    }
}

#[test]
fn allowed_shell_lines_run_nothing_else_under_bash_and_dash() {
    let (entries, _) = load();
    let shells: Vec<&str> = ["bash", "dash"].into_iter().filter(|s| have(s)).collect();
    if !shells.contains(&"dash") {
        eprintln!("dash is missing; only bash runs the corpus");
    }
    let mut ran = 0;
    let mut failures = Vec::new();
    for e in entries
        .iter()
        .filter(|e| e.expect == Verdict::Allow && e.run && matches!(e.tool.as_str(), "bash" | "sh"))
    {
        for shell in &shells {
            match effects(shell, &e.detail) {
                Some(changed) if changed.is_empty() => {}
                Some(changed) => failures.push(format!("{shell} {:?}: {changed:?}", e.detail)),
                None => failures.push(format!("{shell} {:?}: did not finish", e.detail)),
            }
            ran += 1;
        }
    }
    assert!(ran >= 20, "only {ran} runs");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
