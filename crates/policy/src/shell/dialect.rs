//! POSIX `sh` against bash: `tool:sh` lines (and `sh -c`) run in dash on
//! Debian and Ubuntu, where `&>`, `$'…'`, `[[` and the like mean something
//! else than in bash, which the analysis reads. A line holding any of them
//! is never plain, and what dash would run is analysed too, so deny
//! patterns see it.

use super::{Collector, Hazard, walk};
use brush_parser::ParserOptions;

/// Character sequences that only bash gives a meaning (or another one than
/// dash). Looked for anywhere in the line, quoted or not: a false alarm
/// only costs a question.
const BASH_ONLY: &[&str] = &[
    "&>", "|&", ";&", "<<<", "<(", ">(", "$'", "$\"", "$[", "[[", "]]", "((", "}>", "}<",
];

/// Reserved words of bash that dash does not have.
const BASH_WORDS: &[&str] = &["function", "select", "coproc"];

/// Records a [`Hazard::BashOnly`] for each bash-only construct of `line`
/// and analyses `line` as dash would read it.
pub(super) fn sh_only(line: &str, c: &mut Collector) {
    let mut found = false;
    for construct in BASH_ONLY {
        if line.contains(construct) {
            found = true;
            c.hazard(Hazard::BashOnly {
                construct: (*construct).to_owned(),
            });
        }
    }
    for word in line.split(|ch: char| !ch.is_ascii_alphanumeric() && ch != '_') {
        if BASH_WORDS.contains(&word) {
            found = true;
            c.hazard(Hazard::BashOnly {
                construct: word.to_owned(),
            });
        }
    }
    if let Some(brace) = brace_expansion(line) {
        found = true;
        c.hazard(Hazard::BashOnly {
            construct: brace.to_owned(),
        });
    }
    if found {
        let options = ParserOptions {
            sh_mode: true,
            posix_mode: true,
            ..ParserOptions::default()
        };
        walk::analyze_program_with(line, &options, c);
    }
}

/// The first `{…}` holding a `,` or `..` and no blank: bash expands it into
/// several words, dash leaves it as it is.
fn brace_expansion(line: &str) -> Option<&str> {
    let mut rest = line;
    while let Some(open) = rest.find('{') {
        let after = rest.get(open..)?;
        let close = after.find('}')?;
        let inner = after.get(1..close)?;
        if !inner.contains(char::is_whitespace) && (inner.contains(',') || inner.contains("..")) {
            return after.get(..=close);
        }
        rest = after.get(1..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brace_expansions_are_found() {
        assert_eq!(brace_expansion("ls {a,b}"), Some("{a,b}"));
        assert_eq!(brace_expansion("echo x{1..3}y"), Some("{1..3}"));
        assert_eq!(brace_expansion("{ ls; }"), None);
        assert_eq!(brace_expansion("find . -exec x {} +"), None);
        assert_eq!(brace_expansion("{ a, b; }"), None);
    }
}
