//! The analysis reads bash; agents run their commands in the user's
//! shell, which is zsh on macOS. Random lines built from what zsh reads
//! differently (subscripts, `${(e)…}`, glob qualifiers, `$#name`, …) and a
//! payload bash keeps quoted are checked under `readonly`; each one it
//! allows is run by zsh (`zsh -f -c`) in a scratch directory, and must not
//! run the payload (which creates a marker file). From a fixed seed, so a
//! failure is the same every run. Needs zsh: without it the test says so
//! and passes, unless `ZSH_TESTS_REQUIRED=1` (`.ci/zsh-differential`
//! installs zsh and sets it).

use actiongate_policy::{Verdict, check, get_preset};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LINES: usize = 12_000;

/// xorshift64*: enough to spread picks, and the same lines every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn tokens(marker: &str) -> Vec<String> {
    let p = format!("$(touch {marker})");
    let mut t: Vec<String> = [
        "$HOME",
        "${HOME}",
        "$path",
        "$#",
        "$?",
        "$_",
        "$0",
        "$1",
        "$-",
        "$$",
        "$!",
        "$@",
        "$*",
        "[",
        "]",
        "(",
        ")",
        "\"$HOME\"",
        ":",
        "-",
        "e",
        "~",
        "^",
        "=",
        "#",
        "%",
        "{",
        "}",
        ",",
        "1",
        "a",
        "*",
        "?",
        ".",
        "/",
        "x",
        "'",
        "\"",
        "\\",
        "!",
        "@",
        "+",
        "|",
        "&",
        "<",
        ">",
        ";",
        "$",
        "${",
        "'x'",
        "$'x'",
        "\\[",
        "\\]",
        "[[",
        "]]",
        "<1-2>",
        "=(x)",
        "*(N)",
        "~+",
        "~-",
        "$=HOME",
        "${~HOME}",
        "$+HOME",
        "$#HOME",
        "${(e)HOME}",
        "${:-x}",
        "${HOME:-x}",
        "$HOME[1]",
        "$HOME[",
        "${HOME[",
        "$((",
        "))",
        "\\\\",
        "${(%):-",
        "(#q",
        "(+",
        "e:",
        ":)",
        "$(",
        "(e)",
        "(#e)",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    t.extend([
        format!("'{p}'"),
        format!("\\{p}"),
        format!("'a[{p}]'"),
        format!("['{p}']"),
        format!("[1,'{p}']"),
        format!("'{p}']"),
        format!("(e:'touch {marker}':)"),
        format!("'*(e:touch {marker}:)'"),
        format!("`touch {marker}`"),
        format!("'`touch {marker}`'"),
    ]);
    t
}

fn line(rng: &mut Rng, tokens: &[String]) -> String {
    const COMMANDS: &[&str] = &[
        "echo",
        "ls",
        "cat",
        "head",
        "tail",
        "test",
        "[",
        "pwd",
        "which",
        "git log",
        "git status",
    ];
    let mut l = COMMANDS[rng.below(COMMANDS.len())].to_owned();
    for _ in 0..=rng.below(3) {
        l.push(' ');
        for _ in 0..=rng.below(4) {
            l.push_str(&tokens[rng.below(tokens.len())]);
        }
    }
    l
}

/// Runs `line` with zsh in `cwd`, killed after three seconds.
fn run_zsh(line: &str, cwd: &Path) {
    let mut child = Command::new("zsh")
        .args(["-f", "-c", line])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(3) {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn lines_readonly_allows_run_nothing_hidden_in_zsh() {
    if Command::new("zsh").arg("-fc").arg("true").status().is_err() {
        assert!(
            std::env::var("ZSH_TESTS_REQUIRED").as_deref() != Ok("1"),
            "ZSH_TESTS_REQUIRED=1 but zsh is not installed"
        );
        eprintln!("skipped: zsh is not installed (.ci/zsh-differential installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    for f in ["a", "x", "1", "e"] {
        std::fs::write(cwd.join(f), "").unwrap();
    }
    let marker = dir.path().join("hit");
    let tokens = tokens(marker.to_str().unwrap());
    let readonly = get_preset("readonly").unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut allowed, mut ran) = (0, Vec::new());
    for _ in 0..LINES {
        let l = line(&mut rng, &tokens);
        if check(&format!("tool:bash:{l}"), &readonly) != Verdict::Allow {
            continue;
        }
        allowed += 1;
        run_zsh(&l, &cwd);
        if marker.exists() {
            std::fs::remove_file(&marker).unwrap();
            ran.push(l);
        }
    }
    assert!(
        allowed > LINES / 10,
        "too few lines allowed to test: {allowed}"
    );
    assert!(
        ran.is_empty(),
        "zsh ran the payload of allowed lines: {ran:#?}"
    );
}
