//! `sed`: whether its options or script write files or run programs
//! (`-i`, `-f`, the `e` and `w` commands and `s` flags), however getopt
//! and GNU sed read them.

use super::Collector;
use super::commands::long_prefix_of;

/// Judges sed's arguments `lits` (literal words), calling `unsafe_option`
/// for each that writes a file or runs a program.
pub(super) fn sed(lits: &[&str], unsafe_option: &dyn Fn(&mut Collector, &str), c: &mut Collector) {
    // What the next word is: a script (after `-e`, `--expression`), the
    // value of another option (`-l N`), or a word of its own.
    let (mut script_next, mut value_next) = (false, false);
    for a in lits {
        if std::mem::take(&mut script_next) {
            if sed_script_writes_or_runs(a) {
                unsafe_option(c, a);
            }
            continue;
        }
        if std::mem::take(&mut value_next) {
            continue;
        }
        if let Some(long) = a.strip_prefix("--").filter(|l| !l.is_empty()) {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            if long_prefix_of(a, "in-place", 2) || long_prefix_of(a, "file", 2) {
                unsafe_option(c, a);
            } else if "expression".starts_with(name) {
                // `--expression=SCRIPT`, or any prefix getopt takes
                // (`--expr=`, `--e=`), or the script as the next word.
                match value {
                    Some(v) if sed_script_writes_or_runs(v) => unsafe_option(c, a),
                    Some(_) => {}
                    None => script_next = true,
                }
            } else if "line-length".starts_with(name) && value.is_none() {
                value_next = true;
            }
        } else if let Some(cluster) = a.strip_prefix('-').filter(|r| !r.is_empty()) {
            // A short-option cluster: flags until one that takes a value,
            // which is the rest of the word or the next one (`-ne'1e id'`
            // is `-n -e '1e id'`). `-i` edits in place; `-f` reads a
            // script the policy cannot see.
            for (at, ch) in cluster.char_indices() {
                let rest = cluster.get(at + ch.len_utf8()..).unwrap_or("");
                match ch {
                    'i' | 'f' => {
                        unsafe_option(c, a);
                        break;
                    }
                    'e' => {
                        if rest.is_empty() {
                            script_next = true;
                        } else if sed_script_writes_or_runs(rest) {
                            unsafe_option(c, a);
                        }
                        break;
                    }
                    'l' => {
                        value_next = rest.is_empty();
                        break;
                    }
                    _ => {}
                }
            }
        } else if sed_script_writes_or_runs(a) {
            unsafe_option(c, a);
        }
    }
}

/// A deliberately rough look for sed's `w`/`W` (write), `e` (execute)
/// commands and the `w`/`e` flags of `s`, after any address GNU sed reads
/// (`1`, `$`, `0~1`, `1,+2`, `1,~4`, `/re/I`, `\%re%M`). False alarms only
/// cost a question.
fn sed_script_writes_or_runs(script: &str) -> bool {
    let bytes = script.as_bytes();
    // Commands: at the start or after `;`, `{`, `}`, newline, an address or `!`.
    let mut at_command = true;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b';' | b'{' | b'}' | b'\n' => at_command = true,
            b' ' | b'\t' | b'!' | b',' | b'$' | b'~' | b'+' | b'0'..=b'9' => {}
            // A `/regex/` or `\cregexc` address (and its `I`/`M` flags):
            // skip it, a command follows.
            b'/' | b'\\' if at_command => {
                let delim = if b == b'/' {
                    b'/'
                } else {
                    i += 1;
                    match bytes.get(i) {
                        Some(&d) => d,
                        None => return false,
                    }
                };
                i += 1;
                while let Some(&r) = bytes.get(i) {
                    if r == b'\\' {
                        i += 1;
                    } else if r == delim {
                        break;
                    }
                    i += 1;
                }
                while matches!(bytes.get(i + 1), Some(b'I' | b'M')) {
                    i += 1;
                }
            }
            b'e' | b'w' | b'W' if at_command => return true,
            b's' if at_command => {
                let flags = substitution_flags(bytes.get(i + 1..).unwrap_or_default());
                if flags.is_some_and(|f| f.contains(['e', 'w'])) {
                    return true;
                }
                at_command = false;
            }
            _ => at_command = false,
        }
        i += 1;
    }
    false
}

/// The flags of an `s` command given the text right after the `s`.
fn substitution_flags(rest: &[u8]) -> Option<String> {
    let (&delim, body) = rest.split_first()?;
    if delim == b'\\' || delim == b'\n' || delim.is_ascii_alphanumeric() {
        return None;
    }
    let mut seen = 0;
    let mut i = 0;
    while i < body.len() && seen < 2 {
        match body.get(i) {
            Some(b'\\') => i += 2,
            Some(&b) if b == delim => {
                seen += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    let flags = body.get(i..)?;
    let end = flags
        .iter()
        .position(|b| !b.is_ascii_alphanumeric())
        .unwrap_or(flags.len());
    Some(String::from_utf8_lossy(flags.get(..end)?).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_that_write_or_execute_are_caught() {
        for s in [
            "w /tmp/x",
            "1e id",
            "s/a/b/e",
            "s/a/b/w out",
            "s|a|b|gw f",
            "$!w f",
            "/x/ w f",
            "{e id\n}",
            "0~1e id",
            "1~0e id",
            "/x/,+1e id",
            "\\%x%e id",
            "/x/Ie id",
            "/x/Me id",
            "1,~2e id",
            "0~1w f",
            "/x/IMw f",
        ] {
            assert!(sed_script_writes_or_runs(s), "{s}");
        }
        for s in ["s/a/b/g", "s/we/ew/", "p", "1,5d", "s/\\/e/x/g", "/write/p"] {
            assert!(!sed_script_writes_or_runs(s), "{s}");
        }
    }
}
