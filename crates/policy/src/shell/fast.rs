//! A shortcut for the most common shell commands: pipelines of plain words
//! (`ls -la | head -5`, `git log --oneline -n 5`).
//!
//! It accepts only input drawn from a tiny alphabet in which bash has exactly
//! one reading: no quotes, expansions, redirections, globs, comments,
//! newlines or separators other than a single `|`. Everything else goes to
//! the full parser. A property test checks that both give the same answer.

use super::Collector;
use super::words;

/// Reserved words that change the grammar when they start a command.
const RESERVED: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

const ALPHABET: [bool; 128] = words::ascii_set(b" _./:,=@%+-|");

fn in_alphabet(b: u8) -> bool {
    ALPHABET.get(usize::from(b)).copied().unwrap_or(false)
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
        if first.contains('=') || RESERVED.contains(&first) {
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
        args.extend(parts.map(words::plain));
        c.simple_command(&words::plain(name), &args);
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
}
