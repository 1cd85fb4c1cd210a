//! The README's walks, run verbatim: the fenced blocks marked
//! `<!-- readme-test: quickstart -->` (the CLI, in README.md) and
//! `<!-- readme-test: http -->` (curl, in docs/api.md) are taken from their
//! pages as they are and each run with
//! `bash -euo pipefail` in a temp dir. Only what the block itself
//! reads from the environment changes: the built `actiongate` comes first on
//! the PATH and `PORT` is a free port. The walk must end as the README says.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::{binary, free_port};

/// The marker line that precedes each tested block, by the block's name.
fn marker(name: &str) -> String {
    format!("<!-- readme-test: {name} -->")
}

/// A block that has not finished by then has hung (the agent waits 60 s at
/// most; everything else takes seconds).
const LIMIT: Duration = Duration::from_secs(120);

fn readme() -> String {
    page("README.md")
}

/// A page of the repository by its path from the root.
fn page(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&path).unwrap()
}

/// The body of each fenced block right after a `name` marker line, in order.
fn marked_blocks(text: &str, name: &str) -> Vec<String> {
    let marker = marker(name);
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != marker {
            continue;
        }
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```sh") || fence.starts_with("```bash"),
            "the line after {marker} must open a sh block, not {fence:?}"
        );
        let mut body = String::new();
        let mut closed = false;
        for l in lines.by_ref() {
            if l.starts_with("```") {
                closed = true;
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        assert!(closed, "a quick-start block is never closed");
        blocks.push(body);
    }
    blocks
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `script` with `bash -euo pipefail` in `dir`, in its own process
/// group, which is killed afterwards so nothing it started outlives it.
fn run_block(script: &str, dir: &Path, bin_dir: &Path, port: u16) -> Ran {
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env("PORT", port.to_string())
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // What a reader's shell would not have set.
    for (k, _) in std::env::vars() {
        if k.starts_with("ACTIONGATE_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().unwrap();
    let pgid = child.id();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The block's background jobs (the daemon, the waiting agent) are in
    // its group; a block that failed half-way leaves them running.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
    if status.is_none() {
        let _ = child.wait();
    }
    Ran {
        code: status.and_then(|s| s.code()),
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

fn bin_dir() -> PathBuf {
    binary("actiongate").parent().unwrap().to_path_buf()
}

/// Runs the one block named `name` of `text` against its own daemon on a
/// free port; fails with everything it printed unless it exits 0.
fn run_only_block(text: &str, name: &str) -> Ran {
    let blocks = marked_blocks(text, name);
    assert_eq!(blocks.len(), 1, "one {name} block: {blocks:#?}");
    let block = &blocks[0];
    let dir = tempfile::tempdir().unwrap();
    let ran = run_block(block, dir.path(), &bin_dir(), free_port());
    assert_eq!(
        ran.code,
        Some(0),
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}\n--- block\n{block}",
        ran.code,
        ran.stdout,
        ran.stderr
    );
    ran
}

#[test]
fn the_quick_start_block_installs_and_reads_the_port() {
    let blocks = marked_blocks(&readme(), "quickstart");
    assert_eq!(blocks.len(), 1, "{blocks:#?}");
    // The reader's default port, and the install line for a reader who has
    // no `actiongate` on the PATH yet.
    assert!(blocks[0].contains("PORT=${PORT:-8080}"), "{}", blocks[0]);
    assert!(
        blocks[0].contains("cargo install --path crates/server --locked"),
        "{}",
        blocks[0]
    );
}

#[test]
fn the_quick_start_runs_verbatim_and_the_agent_is_approved() {
    let text = readme();
    let ran = run_only_block(&text, "quickstart");
    let stdout = ran.stdout;
    // The sample output shows the two lines the key commands print on
    // stderr, as they really read.
    let sample = sample_output(&text);
    for role in ["agent", "operator"] {
        let prefix = format!("issued {role} key key_");
        let real = ran
            .stderr
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {}", ran.stderr));
        let shown = sample
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("the sample output lacks {prefix:?}: {sample}"));
        let tail = |l: &str| l.split_once(" (").map(|(_, t)| t.to_owned());
        assert_eq!(tail(shown), tail(real), "{shown:?} vs {real:?}");
        assert_eq!(shown.len(), real.len(), "{shown:?} vs {real:?}");
    }
    // The last line is the agent's answer, as the README says.
    let last = stdout.lines().last().unwrap_or_default();
    let (id, rest) = last.split_once(' ').unwrap_or_default();
    assert!(!id.is_empty(), "{stdout}");
    assert_eq!(
        rest, "approved: tool:bash:rm -rf build — go ahead",
        "{stdout}"
    );
    // The operator saw it in the queue before approving it.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with(id) && l.contains(" coder ") && l.contains("clean build")),
        "{stdout}"
    );
}

#[test]
fn the_http_walk_runs_verbatim_and_the_agent_is_approved() {
    let stdout = run_only_block(&page("docs/api.md"), "http").stdout;
    // The queue as the operator saw it, then the agent's answer.
    assert!(
        stdout.contains(r#""action_string":"tool:bash:rm -rf build""#)
            && stdout.contains(r#""status":"pending""#),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().last(),
        Some(r#""status":"approved""#),
        "{stdout}"
    );
}

/// The ```text block that follows the quick-start block.
fn sample_output(text: &str) -> String {
    let (_, after) = text.split_once(&marker("quickstart")).unwrap();
    let (_, after) = after.split_once("```text\n").unwrap();
    after.split("```").next().unwrap_or_default().to_owned()
}

#[test]
fn the_walks_live_where_the_readme_says() {
    // The README keeps its own walk; the curl walk is on the API page, the
    // README links it, and no page holds a walk twice.
    assert_eq!(marked_blocks(&readme(), "quickstart").len(), 1);
    assert_eq!(marked_blocks(&readme(), "http").len(), 0);
    assert_eq!(marked_blocks(&page("docs/api.md"), "http").len(), 1);
    assert!(readme().contains("(docs/api.md)"));
}

#[test]
fn the_quick_start_says_when_it_installs() {
    let block = &marked_blocks(&readme(), "quickstart")[0];
    let first = block.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(
        first.contains("echo 'actiongate is not on the PATH: running cargo install"),
        "{first}"
    );
}

#[test]
fn a_broken_step_fails_the_run() {
    // The harness itself: a block whose step fails must not pass, and its
    // background jobs must not outlive it.
    let dir = tempfile::tempdir().unwrap();
    let script = "sleep 300 &\necho started\nfalse\necho unreachable\n";
    let started = Instant::now();
    let ran = run_block(script, dir.path(), &bin_dir(), free_port());
    assert_eq!(ran.code, Some(1));
    assert_eq!(ran.stdout, "started\n");
    assert!(started.elapsed() < Duration::from_secs(60));
}
