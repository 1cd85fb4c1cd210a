//! POSIX `sh` against bash: `tool:sh` lines (and `sh -c`) run in dash on
//! Debian and Ubuntu, where `&>`, `$'…'`, `[[` and the like mean something
//! else than in bash, which the analysis reads. A line holding any of them
//! outside quotes is never plain, and what dash would run is analysed too,
//! so deny patterns see it.

use super::{Collector, Hazard, walk};
use brush_parser::ParserOptions;
use std::borrow::Cow;

/// Character sequences that only bash gives a meaning (or another one than
/// dash). Looked for in the line's code: outside the quoted strings both
/// shells read as plain characters ([`code_text`]). A false alarm only
/// costs a question.
const BASH_ONLY: &[&str] = &[
    "&>", "|&", ";&", "<<<", "<(", ">(", "$'", "$\"", "$[", "[[", "]]", "((", "}>", "}<",
];

/// Whether `construct` stands in `code` with bash's meaning: `((` after a
/// `$` opens POSIX arithmetic (`$((1+2))`), which dash reads as bash does.
fn bash_only_at(code: &str, construct: &str) -> bool {
    if construct != "((" {
        return code.contains(construct);
    }
    code.match_indices(construct)
        .any(|(at, _)| at == 0 || code.as_bytes().get(at - 1) != Some(&b'$'))
}

/// Reserved words of bash that dash does not have.
const BASH_WORDS: &[&str] = &["function", "select", "coproc"];

/// Records a [`Hazard::BashOnly`] for each bash-only construct of `line`
/// and analyses `line` as dash would read it.
pub(super) fn sh_only(line: &str, c: &mut Collector) {
    let code = code_text(line);
    let mut found = false;
    for construct in BASH_ONLY {
        if bash_only_at(&code, construct) {
            found = true;
            c.hazard(Hazard::BashOnly {
                construct: (*construct).to_owned(),
            });
        }
    }
    for word in code.split(|ch: char| !ch.is_ascii_alphanumeric() && ch != '_') {
        if BASH_WORDS.contains(&word) {
            found = true;
            c.hazard(Hazard::BashOnly {
                construct: word.to_owned(),
            });
        }
    }
    if let Some(brace) = brace_expansion(&code) {
        found = true;
        c.hazard(Hazard::BashOnly {
            construct: brace.to_owned(),
        });
    }
    if found {
        let options = ParserOptions {
            sh_mode: true,
            posix_mode: true,
            ..walk::parser_options()
        };
        walk::analyze_program_with(line, &options, c);
    }
}

/// `line` with each quoted string that bash and dash both read as plain
/// characters (`'…'`, and `"…"` holding nothing but text, escapes and
/// plain `$NAME`s) written as as many `x`s, escaped characters as `x`,
/// and line continuations removed (they join what they separate), so
/// that `echo '[[ x ]]'` holds no `[[`.
///
/// From the first thing whose reading this does not follow as both shells
/// do (`$'`, `${`, `$(`, any other `$` but a plain parameter, a backquote,
/// `#`, `<<`, an unclosed quote), the rest of the line is kept as written:
/// a mistake here may only ever cost a question, never hide a construct.
fn code_text(line: &str) -> Cow<'_, str> {
    let bytes = line.as_bytes();
    if !bytes.iter().any(|b| matches!(b, b'\'' | b'"' | b'\\')) {
        return Cow::Borrowed(line);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let rest = |out: &mut Vec<u8>, from: usize| {
        out.extend_from_slice(bytes.get(from..).unwrap_or_default());
    };
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' => match bytes.get(i + 1) {
                Some(b'\n') => i += 2,
                Some(next) if next.is_ascii() => {
                    out.extend_from_slice(b"\\x");
                    i += 2;
                }
                _ => {
                    rest(&mut out, i);
                    break;
                }
            },
            b'\'' => match memchr::memchr(b'\'', bytes.get(i + 1..).unwrap_or_default()) {
                Some(len) => {
                    out.resize(out.len() + len + 2, b'x');
                    i += len + 2;
                }
                None => {
                    rest(&mut out, i);
                    break;
                }
            },
            b'"' => match double_quoted_len(bytes, i) {
                Some(len) => {
                    out.resize(out.len() + len, b'x');
                    i += len;
                }
                None => {
                    rest(&mut out, i);
                    break;
                }
            },
            b'$' => match plain_parameter_len(bytes, i) {
                Some(len) => {
                    out.extend_from_slice(bytes.get(i..i + len).unwrap_or_default());
                    i += len;
                }
                None => {
                    rest(&mut out, i);
                    break;
                }
            },
            b'`' | b'#' => {
                rest(&mut out, i);
                break;
            }
            b'<' if bytes.get(i + 1) == Some(&b'<') => {
                rest(&mut out, i);
                break;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    // Only ASCII bytes and whole quoted strings were replaced, each by
    // ASCII, so this holds.
    String::from_utf8(out).map_or(Cow::Borrowed(line), Cow::Owned)
}

/// The length of the `"…"` starting at `start`, if it holds nothing but
/// text, escapes and plain parameters (`$HOME`, `$1`, `$?`).
fn double_quoted_len(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        match *bytes.get(i)? {
            b'"' => return Some(i + 1 - start),
            b'\\' => i += 2,
            b'$' => i += plain_parameter_len(bytes, i)?,
            b'`' => return None,
            _ => i += 1,
        }
    }
}

/// The length of the plain parameter (`$NAME`, `$1`, `$?`, …) starting at
/// `start`, or `None` for any other `$`.
fn plain_parameter_len(bytes: &[u8], start: usize) -> Option<usize> {
    let next = *bytes.get(start + 1)?;
    if next.is_ascii_alphabetic() || next == b'_' {
        let name = bytes
            .get(start + 1..)?
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        Some(1 + name)
    } else if next.is_ascii_digit() || matches!(next, b'?' | b'#' | b'@' | b'*' | b'!' | b'-') {
        Some(2)
    } else {
        None
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

    fn bash_only(line: &str) -> Vec<Hazard> {
        let mut c = Collector::default();
        sh_only(line, &mut c);
        c.hazards
            .into_iter()
            .filter(|h| matches!(h, Hazard::BashOnly { .. }))
            .collect()
    }

    #[test]
    fn single_quoted_text_is_not_code() {
        assert_eq!(code_text("echo '[[ x ]]'"), "echo xxxxxxxxx");
        assert!(bash_only("echo '[[ x ]]'").is_empty());
        assert!(bash_only("printf '%s' '&>'").is_empty());
        assert!(bash_only("echo 'function' 'a |& b' '$(x)'").is_empty());
    }

    #[test]
    fn plain_double_quoted_text_is_not_code() {
        assert_eq!(
            code_text(r#"echo "a [[ $HOME \" ]]""#),
            "echo xxxxxxxxxxxxxxxxxx"
        );
        assert!(bash_only(r#"echo "a && b; [[ c ]] $1 $?""#).is_empty());
    }

    #[test]
    fn quoted_text_does_not_hide_what_follows_it() {
        for line in [
            "echo '[[' &>/dev/null touch pwned",
            "echo \"[[\"&>x",
            "echo '{a,b}' {c,d}",
            "echo \\' &> x \\'",
            "echo '\\' &> x",
        ] {
            assert!(!bash_only(line).is_empty(), "{line}");
        }
    }

    #[test]
    fn a_quote_inside_braces_still_expands() {
        assert!(!bash_only("echo {a,'b c'}").is_empty());
    }

    #[test]
    fn a_line_continuation_joins_an_operator() {
        assert_eq!(code_text("echo hi &\\\n> x"), "echo hi &> x");
        assert!(!bash_only("echo hi &\\\n>/dev/null touch pwned").is_empty());
    }

    #[test]
    fn what_the_lexer_does_not_follow_is_read_as_written() {
        for line in [
            // A comment, a here-document and a backquote end quote-awareness:
            // a `'` in them is no quote to either shell.
            "ls # it's\necho hi &>/dev/null touch pwned # '",
            "cat <<E\nit's\nE\necho hi &>/dev/null touch pwned '\n'",
            "echo `echo '` &> x '`",
            // Expansions other than a plain `$NAME`, inside quotes or not.
            "echo \"${x:-'}\" &> x \"'}\"",
            "echo \"$(echo hi &>/dev/null touch pwned)\"",
            "echo $'\\'' &> x '",
            // An unclosed quote.
            "echo ' &> x",
        ] {
            assert!(!bash_only(line).is_empty(), "{line:?}");
        }
    }

    #[test]
    fn escaped_characters_are_not_code() {
        assert_eq!(code_text("echo \\[\\["), "echo \\x\\x");
        assert!(bash_only("echo \\[\\[ x").is_empty());
    }
}
