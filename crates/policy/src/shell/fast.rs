//! A shortcut for the most common shell commands: pipelines of plain words
//! (`ls -la | head -5`, `git log --oneline -n 5`).
//!
//! It accepts only input drawn from a tiny alphabet in which bash has exactly
//! one reading: no quotes, expansions, redirections, globs, comments,
//! newlines or separators other than a single `|`. Everything else goes to
//! the full parser. A property test checks that both give the same answer.

use super::words;
use super::{Collector, Hazard, commands, scan};

/// The most words [`simple_hazard`] splits (kept on the stack); a longer
/// command whose arguments are checked takes the general path.
const MAX_WORDS: usize = 24;

/// Reserved words that change the grammar when they start a command.
pub(super) const RESERVED: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

const ALPHABET: [bool; 128] = words::ascii_set(b" _./:,=@%+-|");

fn in_alphabet(b: u8) -> bool {
    ALPHABET.get(usize::from(b)).copied().unwrap_or(false)
}

/// For one command written the way the analysis would write it back (words
/// of the alphabet one space apart; no pipe, no leading, trailing or double
/// space), the first hazard [`super::analyze_shell`] would report, found
/// without building the analysis: such a command is its own only simple
/// command, so a caller can judge the action string as it is. `None` if
/// `detail` is not of that form.
///
/// The bytes are checked eight at a time ([`scan`]); the arguments are
/// split into words only for commands whose options [`commands::inspect`]
/// checks, since for every other command no argument of the alphabet can be
/// a hazard (they are literals without globs, tested below).
pub(crate) fn simple_hazard(detail: &str) -> Option<Option<Hazard>> {
    let words = scan::single_spaced(detail.as_bytes())?;
    let (name, args) = detail.split_at_checked(words.first_len)?;
    let kind = commands::Kind::of_keyed(name, words.first_key);
    if kind.is_reserved() {
        return None;
    }
    if kind.is_unknown() {
        // `A=1 ls` assigns: left to the full analysis.
        if name.contains('=') {
            return None;
        }
        // Every listed name is plain (tested in `commands`), so only an
        // unknown one can be a path or hidden.
        if let Err(hazard) = words::command_name(&words::bare(name)) {
            return Some(Some(hazard));
        }
    }
    if !kind.may_be_hazardous() {
        return Some(None);
    }
    if kind.is_runner() {
        // What it runs is for the full analysis to show deny patterns.
        return None;
    }
    let mut c = Collector::default();
    if commands::judge_name(name, kind, !args.is_empty(), &mut c) && kind.has_checked_arguments() {
        // `args` is empty or a space and the words one space apart.
        let mut lits = [""; MAX_WORDS - 1];
        let mut count = 0;
        for word in args.split(' ').skip(1) {
            *lits.get_mut(count)? = word;
            count += 1;
        }
        commands::inspect(name, kind, lits.get(..count)?, &mut c);
    }
    if c.runs_its_arguments(name) {
        return None;
    }
    Some(c.hazards.into_iter().next())
}

fn is_reserved(word: &str) -> bool {
    RESERVED.contains(&word)
}

/// Analyzes `detail` if it is a plain pipeline; returns false (having
/// touched nothing) if the full parser is needed.
pub(crate) fn analyze(detail: &str, c: &mut Collector) -> bool {
    let bytes = detail.as_bytes();
    if !bytes.iter().all(|&b| in_alphabet(b)) || detail.contains("||") {
        return false;
    }
    // Validate every command before recording any, so a fallback starts clean.
    for part in detail.split('|') {
        let mut words = part.split(' ').filter(|w| !w.is_empty());
        let Some(first) = words.next() else {
            return false; // empty command: a syntax error the parser reports
        };
        if first.contains('=') || is_reserved(first) {
            return false;
        }
    }
    let mut args = Vec::new();
    for part in detail.split('|') {
        let mut parts = part.split(' ').filter(|w| !w.is_empty());
        let Some(name) = parts.next() else {
            continue;
        };
        args.clear();
        args.extend(parts.map(words::bare));
        c.simple_command(&words::bare(name), &args);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphabet_table_equals_its_definition() {
        for b in 0..=255u8 {
            let expected = b.is_ascii_alphanumeric() || b" _./:,=@%+-|".contains(&b);
            assert_eq!(in_alphabet(b), expected, "{b}");
        }
    }

    /// `simple_hazard` relies on words of the alphabet being written back
    /// as they are, and on none of them holding a glob character.
    #[test]
    fn alphabet_words_are_bare() {
        for b in 0..128u8 {
            if in_alphabet(b) && b != b' ' && b != b'|' {
                let word = char::from(b).to_string();
                let mut out = String::new();
                words::render(&words::plain(&word), &mut out);
                assert_eq!(out, word, "{b}");
                assert!(!words::plain(&word).glob, "{b}");
            }
        }
    }
}
