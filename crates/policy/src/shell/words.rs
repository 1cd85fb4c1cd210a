//! Single shell words: what they expand to when that is known, whether they
//! hide anything, and their canonical spelling.

use super::{Collector, Hazard, MAX_DEPTH, walk};
use brush_parser::word::{WordPiece, WordPieceWithSource};
use std::borrow::Cow;

/// What the policy knows about one word.
#[derive(Debug, Clone)]
pub(crate) struct WordInfo<'a> {
    /// The word as written.
    pub raw: &'a str,
    /// Its value after quote removal, or `None` if only known at run time.
    pub literal: Option<Cow<'a, str>>,
    /// It holds unquoted glob or brace characters.
    pub glob: bool,
    /// It holds quotes or escapes.
    pub quoted: bool,
}

/// The ASCII alphanumerics plus `extra`, as a table indexed by byte: a
/// per-character lookup where `"…".contains(c)` would scan a string (these
/// run over every byte of every shell command).
pub(crate) const fn ascii_set(extra: &[u8]) -> [bool; 128] {
    let mut set = [false; 128];
    let mut b = 0;
    while b < 128 {
        set[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        set[(extra[i] & 0x7f) as usize] = true;
        i += 1;
    }
    set
}

/// Whether `c` is in a set built by [`ascii_set`].
pub(crate) fn in_set(set: &[bool; 128], c: char) -> bool {
    set.get(c as usize).copied().unwrap_or(false)
}

const BARE_RAW: [bool; 128] = ascii_set(b"_@%+=:,./-~^!#*?[]{}");
const BARE_LITERAL: [bool; 128] = ascii_set(b"_@%+=:,./-");
/// Characters of a plain command name (besides `/` in a path).
const NAME_CHARS: [bool; 128] = ascii_set(b"_.+-");

/// Characters that need no quoting and mean nothing special inside a word
/// (globs aside, which are tracked separately).
fn bare_raw(c: char) -> bool {
    in_set(&BARE_RAW, c)
}

/// Characters a literal value may hold and still be written without quotes.
fn bare_literal(c: char) -> bool {
    in_set(&BARE_LITERAL, c)
}

fn has_glob(text: &str) -> bool {
    text.contains(['*', '?', '[', '{', '('])
}

/// A word of the fast path's alphabet, which holds no glob character (a
/// test checks this).
pub(crate) fn bare(raw: &str) -> WordInfo<'_> {
    WordInfo {
        raw,
        literal: Some(Cow::Borrowed(raw)),
        glob: false,
        quoted: false,
    }
}

/// A word of plain characters: no parsing needed.
pub(crate) fn plain(raw: &str) -> WordInfo<'_> {
    WordInfo {
        raw,
        literal: Some(Cow::Borrowed(raw)),
        glob: has_glob(raw),
        quoted: false,
    }
}

/// Reads a word, recording hazards for substitutions and expansions it
/// holds and analyzing the commands inside substitutions.
pub(crate) fn analyze<'a>(raw: &'a str, c: &mut Collector) -> WordInfo<'a> {
    if !raw.contains(['$', '`', '\'', '"', '\\']) {
        return plain(raw);
    }
    // A panic in the word parser is an unparsable word, never a crash.
    let parsed = std::panic::catch_unwind(|| {
        brush_parser::word::parse(raw, &walk::parser_options()).map_err(|e| e.to_string())
    })
    .unwrap_or_else(|_| Err("the parser failed".to_owned()));
    let pieces = match parsed {
        Ok(pieces) => pieces,
        Err(message) => {
            c.hazard(Hazard::Unparsable { message });
            return WordInfo {
                raw,
                literal: None,
                glob: false,
                quoted: true,
            };
        }
    };
    let mut info = WordInfo {
        raw,
        literal: Some(Cow::Owned(String::new())),
        glob: false,
        quoted: false,
    };
    pieces_into(raw, &pieces, false, &mut info, c);
    info
}

/// Checks a here-document body that undergoes expansion, without the
/// word parser: it took time exponential in the substitutions and
/// expansions left open in a body (cargo fuzz found 14 KiB taking half a
/// second). Every construct that can run or evaluate something is a
/// hazard, escaped or not (a false alarm only costs a question); the
/// commands inside substitutions are found by the search for hidden
/// commands, which runs on every line with a hazard.
pub(crate) fn analyze_heredoc(body: &str, c: &mut Collector) {
    let bytes = body.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match (b, bytes.get(i + 1)) {
            (b'$', Some(b'(')) if bytes.get(i + 2) == Some(&b'(') => c.hazard(Hazard::Arithmetic),
            (b'`', _) | (b'$', Some(b'(')) => c.hazard(Hazard::CommandSubstitution),
            (b'$', Some(b'[')) => c.hazard(Hazard::Arithmetic),
            (b'$', Some(b'{')) => {
                let rest = body.get(i..).unwrap_or_default();
                let end = rest.find('}').map_or(rest.len(), |e| e + 1);
                let expansion = rest.get(..end).unwrap_or(rest);
                if !is_simple_parameter(expansion) {
                    c.hazard(Hazard::ComplexExpansion {
                        word: expansion.to_owned(),
                    });
                }
            }
            _ => {}
        }
    }
}

fn push_literal(info: &mut WordInfo<'_>, text: &str) {
    if let Some(Cow::Owned(s)) = &mut info.literal {
        s.push_str(text);
    }
}

fn pieces_into(
    raw: &str,
    pieces: &[WordPieceWithSource],
    in_quotes: bool,
    info: &mut WordInfo<'_>,
    c: &mut Collector,
) {
    let mut before = Before::Other;
    for p in pieces {
        let source = raw.get(p.start_index..p.end_index).unwrap_or_default();
        let next = match &p.piece {
            WordPiece::ParameterExpansion(_) => Before::Parameter,
            WordPiece::Text(text) if text.ends_with('$') => Before::Dollar,
            _ => Before::Other,
        };
        match &p.piece {
            WordPiece::Text(text) => {
                if !in_quotes && has_glob(text) {
                    info.glob = true;
                }
                zsh_only(text, before, c);
                push_literal(info, text);
            }
            WordPiece::SingleQuotedText(text) => {
                info.quoted = true;
                push_literal(info, text);
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                info.quoted = true;
                pieces_into(raw, inner, true, info, c);
            }
            WordPiece::EscapeSequence(escape) => {
                info.quoted = true;
                // `\` + newline is a line continuation and stands for nothing.
                let escaped = escape.strip_prefix('\\').unwrap_or(escape);
                if escaped != "\n" {
                    push_literal(info, escaped);
                }
            }
            WordPiece::TildeExpansion(_) => push_literal(info, source),
            WordPiece::AnsiCQuotedText(_) => {
                // Escapes like `\x72` can spell anything; treat the value as
                // unknown rather than decode it.
                info.quoted = true;
                info.literal = None;
            }
            WordPiece::ParameterExpansion(_) => {
                info.literal = None;
                if !is_simple_parameter(source) && !is_default_expansion(source) {
                    if source.contains("$(") || source.contains('`') {
                        c.hazard(Hazard::CommandSubstitution);
                    }
                    c.hazard(Hazard::ComplexExpansion {
                        word: raw.to_owned(),
                    });
                }
            }
            WordPiece::CommandSubstitution(inner)
            | WordPiece::BackquotedCommandSubstitution(inner) => {
                info.literal = None;
                c.hazard(Hazard::CommandSubstitution);
                nested(inner, c);
            }
            WordPiece::ArithmeticExpression(_) => {
                info.literal = None;
                if !is_constant_arithmetic(source) {
                    c.hazard(Hazard::Arithmetic);
                }
            }
        }
        before = next;
    }
}

/// What the piece before a text piece was, as [`zsh_only`] needs it.
#[derive(Clone, Copy, PartialEq)]
enum Before {
    /// A parameter expansion.
    Parameter,
    /// Text ending with a `$` (the word parser splits `${(e)x}` there).
    Dollar,
    /// Anything else, or nothing.
    Other,
}

/// Records a [`Hazard::ZshOnly`] for text that bash keeps as written but
/// zsh evaluates: a `[` right after a parameter, or after a name after one
/// (`$HOME['$(cmd)']` and `$#HOME['$(cmd)']` subscript there, read as
/// arithmetic that runs the quoted `$(cmd)`), or a `$` that opens what
/// bash could not parse as an expansion (`${(e)…}`, `${~x}`, `$=x`,
/// `$+x[…]`: the word parser leaves them as text). Found with zsh 5.9 and
/// random lines `readonly` allowed.
fn zsh_only(text: &str, before: Before, c: &mut Collector) {
    let bytes = text.as_bytes();
    // `$#name[…]` (a length) reads to bash as `$#` and text.
    let name_then_bracket = || {
        text.trim_start_matches(|ch: char| ch.is_ascii_alphanumeric() || ch == '_')
            .starts_with('[')
    };
    if before == Before::Parameter && name_then_bracket() {
        c.hazard(Hazard::ZshOnly {
            construct: "$name[…]".to_owned(),
        });
    }
    let opens = |b: Option<&u8>| matches!(b, Some(b'{' | b'=' | b'~' | b'^' | b'+' | b'(' | b'['));
    let after_dollar = (before == Before::Dollar)
        .then_some(0)
        .into_iter()
        .chain(text.match_indices('$').map(|(i, _)| i + 1));
    for at in after_dollar {
        if opens(bytes.get(at)) {
            let construct = format!("${}", text.get(at..at + 1).unwrap_or_default());
            c.hazard(Hazard::ZshOnly { construct });
        }
    }
}

/// Analyzes the commands inside a substitution, so that deny patterns and
/// the strictest-answer rule see them.
pub(crate) fn nested(program: &str, c: &mut Collector) {
    if c.depth >= MAX_DEPTH {
        c.hazard(Hazard::TooDeep);
        return;
    }
    c.depth += 1;
    walk::analyze_program(program, c);
    c.depth -= 1;
}

/// `$NAME`, `${NAME}`, `$1`, `$?` and friends: expansions that only read a
/// variable. Anything else (`${x:-$(cmd)}`, `${!x}`, `${x@P}`, `${a[$(cmd)]}`)
/// can hide more.
fn is_simple_parameter(source: &str) -> bool {
    let name_ok = |name: &str| {
        let mut chars = name.chars();
        match chars.next() {
            Some(first) if first.is_ascii_alphabetic() || first == '_' => {
                chars.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            }
            Some(first) if first.is_ascii_digit() => chars.all(|ch| ch.is_ascii_digit()),
            Some(first) => name.len() == 1 && "@*#?$!-".contains(first),
            None => false,
        }
    };
    match source.strip_prefix('$') {
        Some(rest) => match rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            Some(inner) => name_ok(inner),
            None => name_ok(rest),
        },
        None => false,
    }
}

/// `${NAME:-word}`, `${NAME-word}`, `${NAME:+word}` and `${NAME+word}`
/// with a plain `NAME` (or positional parameter) and a `word` of plain
/// characters only: they read a variable and assign nothing, and nothing
/// in them is expanded again. `${x:=y}` and `${x=y}` assign, `${x:?}`
/// fails the command, and a word holding `$`, a quote, a backquote or a
/// brace (`${x:-$(cmd)}`, `${x:-${y:=z}}`) can hide more: all asked.
fn is_default_expansion(source: &str) -> bool {
    let Some(inner) = source
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
    else {
        return false;
    };
    let name_len = match inner.bytes().next() {
        Some(b) if b.is_ascii_digit() => inner.bytes().take_while(u8::is_ascii_digit).count(),
        Some(b) if b.is_ascii_alphabetic() || b == b'_' => inner
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count(),
        _ => return false,
    };
    let rest = inner.get(name_len..).unwrap_or_default();
    let word = [":-", ":+", "-", "+"]
        .iter()
        .find_map(|op| rest.strip_prefix(op));
    word.is_some_and(|word| word.chars().all(|ch| bare_literal(ch) || ch == '~'))
}

/// The longest arithmetic expression over constants that is plain.
const MAX_CONSTANT_ARITHMETIC: usize = 128;

/// `$(( … ))` over numbers alone: constants (`7`, `0x1f`, `8#17`: every
/// run of letters, digits, `_`, `#` and `@` starts with a digit, so none
/// names a variable), blanks, operators and parentheses. Without a
/// variable nothing is assigned, incremented or evaluated again (a
/// variable's value is itself evaluated as arithmetic, which can run
/// commands through a subscript), and without `$`, quotes or backquotes
/// nothing else expands. An expression longer than
/// [`MAX_CONSTANT_ARITHMETIC`] (`$((------…1))` nests as deep as it is
/// long in the shell's evaluator), `$[ … ]` (bash only) and anything else
/// ask.
fn is_constant_arithmetic(source: &str) -> bool {
    let Some(expr) = source
        .strip_prefix("$((")
        .and_then(|rest| rest.strip_suffix("))"))
        .filter(|expr| expr.len() <= MAX_CONSTANT_ARITHMETIC)
    else {
        return false;
    };
    let mut previous_in_run = false;
    for b in expr.bytes() {
        let in_run = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'#' | b'@');
        if in_run && !previous_in_run && !b.is_ascii_digit() {
            return false;
        }
        if !in_run
            && !matches!(
                b,
                b' ' | b'\t'
                    | b'\n'
                    | b'+'
                    | b'-'
                    | b'*'
                    | b'/'
                    | b'%'
                    | b'('
                    | b')'
                    | b'<'
                    | b'>'
                    | b'='
                    | b'!'
                    | b'&'
                    | b'|'
                    | b'^'
                    | b'~'
                    | b'?'
                    | b':'
                    | b','
            )
        {
            return false;
        }
        previous_in_run = in_run;
    }
    true
}

/// The variables a command may be run with for the line to stay plain
/// (`LANG=C ls`): the locale and the time zone change how a program
/// writes what it reads, not what runs. `PATH`, `LD_*`, `GIT_*`, pagers,
/// editors, `BASH_ENV`, `LOCPATH`, `GCONV_PATH` and every other name are
/// not here: they change what runs.
const PLAIN_PREFIX_VARIABLES: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_ADDRESS",
    "LC_ALL",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NAME",
    "LC_NUMERIC",
    "LC_PAPER",
    "LC_TELEPHONE",
    "LC_TIME",
    "TZ",
];

/// Whether `NAME=value` before a command leaves the line plain: a name of
/// [`PLAIN_PREFIX_VARIABLES`] and a value written without quotes or
/// expansions, of letters, digits and `_.@:+-` (a locale name such as
/// `C.UTF-8`, `de_DE@euro` or `en:de`), and for `TZ` also `/` without a
/// `..` step (`Europe/Paris`). A locale given as a path (`LANG=/tmp/x`)
/// asks.
pub(crate) fn is_plain_prefix_assignment(name: &str, append: bool, value: &str) -> bool {
    let value_ok = |extra: &[u8]| {
        value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.@:+-".contains(&b) || extra.contains(&b))
    };
    !append
        && PLAIN_PREFIX_VARIABLES.contains(&name)
        && if name == "TZ" {
            value_ok(b"/") && !value.contains("..")
        } else {
            value_ok(b"")
        }
}

/// Whether the operand of a `-v`/`-R` test may name an array element,
/// whose subscript bash evaluates as arithmetic (which can run commands):
/// it holds a `[` or is known only at run time. A name without `[` is
/// only looked up (an invalid one is an error, nothing runs).
pub(crate) fn may_subscript(operand: &WordInfo<'_>) -> bool {
    operand.glob || operand.literal.as_deref().is_none_or(|v| v.contains('['))
}

/// The command name if it is a plain name looked up in `PATH` (or a
/// builtin). Quoting does not hide a name whose value is known and plain:
/// `'ls'` and `l\s` run `ls` (quotes only keep aliases and reserved words
/// from applying, and neither can make a plain name run something else in
/// a non-interactive shell).
pub(crate) fn command_name<'a>(word: &WordInfo<'a>) -> Result<Cow<'a, str>, Hazard> {
    let raw = word.raw;
    let hidden = || Hazard::HiddenCommandName {
        word: raw.to_owned(),
    };
    let Some(value) = word.literal.as_ref() else {
        return Err(hidden());
    };
    if value.is_empty() {
        return Err(hidden());
    }
    if !word.quoted && (raw == "[" || raw == ".") {
        return Ok(Cow::Borrowed(raw));
    }
    let plain_char = |b: u8| NAME_CHARS.get(usize::from(b)).copied().unwrap_or(false);
    if value.contains('/') {
        return Err(if value.bytes().all(|b| b == b'/' || plain_char(b)) {
            Hazard::PathCommandName {
                word: raw.to_owned(),
            }
        } else {
            hidden()
        });
    }
    let starts_plain = value
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
    if starts_plain && value.bytes().all(plain_char) {
        Ok(value.clone())
    } else {
        Err(hidden())
    }
}

/// Appends the canonical spelling of a word: as written if it needs no
/// quoting, else its literal value in single quotes, else as written.
pub(crate) fn render(word: &WordInfo<'_>, out: &mut String) {
    if word.raw.chars().all(bare_raw) {
        out.push_str(word.raw);
        return;
    }
    match &word.literal {
        Some(value) if !value.is_empty() && value.chars().all(bare_literal) => out.push_str(value),
        Some(value) => {
            out.push('\'');
            out.push_str(&value.replace('\'', r"'\''"));
            out.push('\'');
        }
        None => out.push_str(word.raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heredoc_hazards(body: &str) -> Vec<Hazard> {
        let mut c = Collector::default();
        analyze_heredoc(body, &mut c);
        c.hazards
    }

    #[test]
    fn here_document_bodies_flag_what_can_run_or_evaluate() {
        assert_eq!(heredoc_hazards("a $(id) b"), [Hazard::CommandSubstitution]);
        assert_eq!(heredoc_hazards("`id`"), [Hazard::CommandSubstitution]);
        assert_eq!(heredoc_hazards("$((a[1]))"), [Hazard::Arithmetic]);
        assert_eq!(heredoc_hazards("$[1]"), [Hazard::Arithmetic]);
        assert_eq!(
            heredoc_hazards("x ${a:-$(id)} y"),
            [
                Hazard::ComplexExpansion {
                    word: "${a:-$(id)}".into()
                },
                Hazard::CommandSubstitution
            ]
        );
        // An unclosed expansion is complex too.
        assert!(!heredoc_hazards("${x[").is_empty());
    }

    #[test]
    fn here_document_bodies_of_text_and_plain_parameters_are_clean() {
        for body in [
            "hello\n",
            "$HOME ${HOME} $1 $?\n",
            "a $ b { } ( ) [ ]\n",
            "",
        ] {
            assert!(heredoc_hazards(body).is_empty(), "{body:?}");
        }
    }

    #[test]
    fn simple_parameters_are_recognized() {
        for s in ["$HOME", "${HOME}", "$1", "$?", "${_x1}"] {
            assert!(is_simple_parameter(s), "{s}");
        }
        for s in [
            "${x:-$(id)}",
            "${!x}",
            "${x@P}",
            "${a[$(id)]}",
            "${#x}",
            "$",
        ] {
            assert!(!is_simple_parameter(s), "{s}");
        }
    }

    #[test]
    fn default_expansions_of_plain_words_are_recognized() {
        for s in [
            "${HOME:-/tmp}",
            "${x-a.b}",
            "${x:+set}",
            "${x+}",
            "${1:-.}",
            "${x:-~/a}",
        ] {
            assert!(is_default_expansion(s), "{s}");
        }
        for s in [
            "${x:=y}",
            "${x=y}",
            "${x:?}",
            "${x:-$y}",
            "${x:-a b}",
            "${x:-'a'}",
            "${x:-`id`}",
            "${x:-${y}}",
            "${!x:-a}",
            "${a[1]:-a}",
            "${#x}",
            "${x}",
            "$x",
            "${x:-a}}",
        ] {
            assert!(!is_default_expansion(s), "{s}");
        }
    }

    #[test]
    fn only_arithmetic_over_constants_is_plain() {
        for s in [
            "$((1+2))",
            "$(( (7*6) % 5 ))",
            "$((0x1f + 8#17))",
            "$((2**3 > 1 ? 1 : 0))",
            "$((1,2))",
        ] {
            assert!(is_constant_arithmetic(s), "{s}");
        }
        for s in [
            "$((x))",
            "$((x=1))",
            "$((x++))",
            "$((1+_x))",
            "$((1+$x))",
            "$((1+$(id)))",
            "$(('1'))",
            "$((a[1]))",
            "$[1+2]",
            "$((1+\\x))",
            "$((1+`id`))",
            format!("$(({}1))", "-".repeat(MAX_CONSTANT_ARITHMETIC)).as_str(),
        ] {
            assert!(!is_constant_arithmetic(s), "{s}");
        }
    }

    #[test]
    fn only_locale_and_time_zone_prefixes_are_plain() {
        for (name, value) in [
            ("LANG", "C"),
            ("LC_ALL", "C.UTF-8"),
            ("LANGUAGE", "en:de"),
            ("LC_MESSAGES", "de_DE@euro"),
            ("TZ", "Europe/Paris"),
            ("LANG", ""),
        ] {
            assert!(
                is_plain_prefix_assignment(name, false, value),
                "{name}={value}"
            );
        }
        for (name, append, value) in [
            ("PATH", false, "/tmp"),
            ("LD_PRELOAD", false, "x.so"),
            ("GIT_PAGER", false, "less"),
            ("PAGER", false, "less"),
            ("EDITOR", false, "vi"),
            ("BASH_ENV", false, "x"),
            ("LOCPATH", false, "."),
            ("GCONV_PATH", false, "."),
            ("LANG", true, "C"),
            ("LANG", false, "/tmp/x"),
            ("LANG", false, "$x"),
            ("LANG", false, "'C'"),
            ("TZ", false, "../../x"),
            ("lang", false, "C"),
        ] {
            assert!(
                !is_plain_prefix_assignment(name, append, value),
                "{name}={value}"
            );
        }
    }

    #[test]
    fn character_sets_equal_their_definitions() {
        for b in 0..=255u8 {
            let c = char::from(b);
            let alnum = c.is_ascii_alphanumeric();
            assert_eq!(
                bare_raw(c),
                alnum || "_@%+=:,./-~^!#*?[]{}".contains(c),
                "{c:?}"
            );
            assert_eq!(bare_literal(c), alnum || "_@%+=:,./-".contains(c), "{c:?}");
        }
        assert!(!bare_raw('é') && !bare_literal('\u{12f}'));
    }

    #[test]
    fn render_quotes_only_when_needed() {
        let mut c = Collector::default();
        let mut out = String::new();
        for raw in ["ls", "'a b'", "\"-i\"", "'it'\\''s'", "*.rs", "$HOME"] {
            let w = analyze(raw, &mut c);
            render(&w, &mut out);
            out.push('|');
        }
        assert_eq!(out, r"ls|'a b'|-i|'it'\''s'|*.rs|$HOME|");
    }
}
