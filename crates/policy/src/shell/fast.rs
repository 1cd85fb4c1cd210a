//! A shortcut for the most common shell commands: pipelines of plain words
//! (`ls -la | head -5`, `git log --oneline -n 5`).
//!
//! It accepts only input drawn from a tiny alphabet in which bash has exactly
//! one reading: no quotes, expansions, redirections, globs, comments,
//! newlines or separators other than a single `|`. Everything else goes to
//! the full parser. A property test checks that both give the same answer.

use super::words;
use super::{Collector, Hazard, commands};

/// The most words [`simple_hazard`] takes (kept on the stack); longer
/// commands take the general path.
const MAX_WORDS: usize = 24;

/// Reserved words that change the grammar when they start a command.
const RESERVED: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

const ALPHABET: [bool; 128] = words::ascii_set(b" _./:,=@%+-|");

fn in_alphabet(b: u8) -> bool {
    ALPHABET.get(usize::from(b)).copied().unwrap_or(false)
}

/// What [`simple_hazard`] makes of each byte: one lookup in a table of all
/// 256 bytes instead of several comparisons.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ByteClass {
    /// Not in a simple command (outside the alphabet, or `|`).
    Other,
    Word,
    /// `=`, which makes a first word an assignment.
    Equals,
    Space,
}

const CLASSES: [ByteClass; 256] = {
    let mut classes = [ByteClass::Other; 256];
    let mut b = 0;
    while b < 128 {
        if ALPHABET[b] {
            classes[b] = ByteClass::Word;
        }
        b += 1;
    }
    classes[b' ' as usize] = ByteClass::Space;
    classes[b'=' as usize] = ByteClass::Equals;
    classes[b'|' as usize] = ByteClass::Other;
    classes
};

/// For one command written the way the analysis would write it back (words
/// of the alphabet one space apart; no pipe, no leading, trailing or double
/// space), the first hazard [`super::analyze_shell`] would report, found
/// without building the analysis: such a command is its own only simple
/// command, so a caller can judge the action string as it is. `None` if
/// `detail` is not of that form.
pub(crate) fn simple_hazard(detail: &str) -> Option<Option<Hazard>> {
    // The command name, then its arguments.
    let mut words = [""; MAX_WORDS];
    let mut count = 0;
    let mut start = 0;
    for (i, &b) in detail.as_bytes().iter().enumerate() {
        match CLASSES[usize::from(b)] {
            ByteClass::Word => {}
            // `A=1 ls` assigns: left to the full analysis.
            ByteClass::Equals if count == 0 => return None,
            ByteClass::Equals => {}
            ByteClass::Space if i == start => return None, // a leading or a double space
            ByteClass::Space => {
                *words.get_mut(count)? = detail.get(start..i)?;
                count += 1;
                start = i + 1;
            }
            ByteClass::Other => return None,
        }
    }
    if start == detail.len() {
        return None; // empty, or a trailing space
    }
    *words.get_mut(count)? = detail.get(start..)?;
    let (name, args) = words.get(..=count)?.split_first()?;
    if is_reserved(name) {
        return None;
    }
    let mut c = Collector::default();
    match words::command_name(&words::bare(name)) {
        // Words of the alphabet are literals without globs (tested below).
        Ok(plain) => commands::judge_literal(plain, args, &mut c),
        Err(hazard) => c.hazard(hazard),
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

    #[test]
    fn byte_classes_follow_the_alphabet() {
        for b in 0..=255u8 {
            let expected = match b {
                b' ' => ByteClass::Space,
                b'=' => ByteClass::Equals,
                b'|' => ByteClass::Other,
                _ if in_alphabet(b) => ByteClass::Word,
                _ => ByteClass::Other,
            };
            assert!(CLASSES[usize::from(b)] == expected, "{b}");
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
