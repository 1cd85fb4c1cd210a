//! How shells other than the one a line is asked as read it. A hook asks
//! about a command line as bash (`tool:bash:`); the runtime may run it in
//! dash, or type it into an interactive bash or zsh that first expands
//! history references. Where the readings differ, the hook cannot show
//! what will run, and leaves the call to a human (`Origin::unsure`).

/// Sequences that bash and POSIX `sh` (dash) read differently (the
/// policy's `sh` dialect lists the same), looked for anywhere in the line,
/// quoted or not: a false alarm only asks.
const BASH_ONLY: &[&str] = &[
    "&>", "|&", ";&", "<<<", "<(", ">(", "$'", "$\"", "$[", "[[", "]]", "}>", "}<",
];

/// Reserved words of bash that dash does not have.
const BASH_WORDS: &[&str] = &["function", "select", "coproc"];

/// What in `line` bash and dash read differently, if anything: one of
/// [`BASH_ONLY`] or [`BASH_WORDS`], a `((` that is not `$((`, or a brace
/// expansion (`{a,b}`, `{1..3}`). A runtime whose hook input does not
/// say which shell runs a line (Codex runs it in the shell the model
/// names, `/bin/sh` for any it does not know; Cursor in the user's
/// terminal; opencode in `$SHELL`) may run it in dash:
/// `echo $'\' ; touch x #'` is one `echo` to bash and an `echo` and a
/// `touch` to dash.
pub fn read_otherwise_by_dash(line: &str) -> Option<String> {
    if let Some(c) = BASH_ONLY.iter().find(|c| line.contains(**c)) {
        return Some((*c).to_owned());
    }
    let mut words = line.split(|c: char| !c.is_ascii_alphanumeric() && c != '_');
    if let Some(w) = words.find(|w| BASH_WORDS.contains(w)) {
        return Some(w.to_owned());
    }
    let bytes = line.as_bytes();
    for (at, pair) in bytes.windows(2).enumerate() {
        let after_dollar = at > 0 && bytes.get(at - 1) == Some(&b'$');
        if pair == b"((" && !after_dollar {
            return Some("((".to_owned());
        }
        if pair[0] == b'{' && !after_dollar {
            let inner = line[at + 1..]
                .split(['}', ' ', '\t', '\n'])
                .next()
                .unwrap_or("");
            if inner.contains(',') || inner.contains("..") {
                return Some("{".to_owned());
            }
        }
    }
    None
}

/// Whose history expansion a line is read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// An interactive bash (Copilot CLI's shell).
    Bash,
    /// An interactive shell that may be bash or zsh (a user's terminal).
    /// zsh leaves alone less than bash: a `!"` even ends a double-quoted
    /// string there (`echo "done!"` reads on to the next line), and
    /// `[!a]` and `${!x}` are history references.
    BashOrZsh,
}

/// Whether an interactive shell would expand a history reference in
/// `line` before running it: a `!`
/// outside single quotes and not escaped (`!!`, `!#:s/Q/$/`, `!-2`,
/// `!cmd`, `"!x"`), or a line starting with `^` (`^old^new`). As bash
/// reads it (`histexpand.c`, `bashhist.c`), a `!` is left alone before a
/// blank, `=` or the end of the line; for bash alone, also before the `"`
/// closing a double-quoted string, in `$!` (not at the line's start), in
/// a glob's `[!…]` and in `${!…}`. The tests hold lines bash 5.2 and zsh
/// 5.9 were seen to expand or not.
/// `bash -c`, which the analysis reads the line as, expands none of them;
/// the line then may run what its text does not show. Quotes are followed
/// line by line, each line from the start: a reading that finds more only
/// asks more.
pub fn expands_history(line: &str, shell: History) -> bool {
    line.lines().any(|l| {
        if l.trim_start().starts_with('^') {
            return true;
        }
        let chars: Vec<char> = l.chars().collect();
        let (mut single, mut double, mut escaped) = (false, false, false);
        for (i, &c) in chars.iter().enumerate() {
            match c {
                _ if escaped => escaped = false,
                '\\' if !single => escaped = true,
                '\'' if !double => single = !single,
                '"' if !single => double = !double,
                '!' if !single && !history_left_alone(&chars, i, double, shell) => return true,
                _ => {}
            }
        }
        false
    })
}

/// Whether bash leaves the `!` at `chars[i]` as it is (see
/// [`expands_history`]).
fn history_left_alone(chars: &[char], i: usize, double: bool, shell: History) -> bool {
    let before = |n: usize| i.checked_sub(n).map(|j| chars[j]);
    let closes_later = |c: char| chars[i + 1..].contains(&c);
    match chars.get(i + 1) {
        None | Some(' ' | '\t' | '\r' | '=') => return true,
        _ if shell == History::BashOrZsh => return false,
        Some('"') if double => return true,
        _ => {}
    }
    (i > 1 && before(1) == Some('$'))
        || (before(1) == Some('[') && closes_later(']'))
        || (before(1) == Some('{') && before(2) == Some('$') && closes_later('}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_dash_reads_otherwise_are_found() {
        for (line, construct) in [
            ("echo $'\\' ; touch x #'", "$'"),
            ("ls &> out", "&>"),
            ("[[ -f x ]] && ls", "[["),
            ("function f { ls; }", "function"),
            ("echo {a,b}", "{"),
            ("echo {1..3}", "{"),
            ("(( x = 1 ))", "(("),
        ] {
            assert_eq!(
                read_otherwise_by_dash(line).as_deref(),
                Some(construct),
                "{line}"
            );
        }
        for line in [
            "ls -la",
            "echo ${HOME} $((1+2))",
            "{ ls; }",
            "cargo test -- --nocapture",
        ] {
            assert_eq!(read_otherwise_by_dash(line), None, "{line}");
        }
    }

    #[test]
    fn history_references_are_found_outside_single_quotes() {
        for line in [
            "echo \"Q(x)\" !#:s/Q/$/",
            "!!",
            "echo !-2",
            "echo \"a !x\"",
            "echo \"it's !x\"",
            "ls\n^ls^rm -rf ~",
            "  ^a^b",
            "echo a!\"b\"",
            "echo [!a",
            "echo {!x}",
            "echo \"$ !x\"",
            "$!x",
            ": $(echo !x)",
            ": !(a)",
            ": \"a!b\"",
            ": ${!x",
        ] {
            assert!(expands_history(line, History::Bash), "{line}");
            assert!(expands_history(line, History::BashOrZsh), "{line}");
        }
        for line in [
            "echo 'a !x'",
            "echo \\!x",
            "test ! -f x",
            "[ a != b ]",
            "echo done!",
            "awk '!seen[$0]++'",
            "echo a^b",
            "echo \"done!\"",
            "echo \"a!\"b",
            "kill $!",
            "ls [!a]*",
            "echo ${!x}",
            ": \"${!x}\"",
            ": \"$!\"",
            ": x[!]",
            ": !=",
            ": \"!\"",
        ] {
            assert!(!expands_history(line, History::Bash), "{line}");
        }
        // What zsh reads otherwise: `!"` ends the quotes, `[!a]` and
        // `${!x}` expand.
        for line in [": \"done!\"", ": [!a]", ": ${!x}", ": x[!]", ": \"!\""] {
            assert!(expands_history(line, History::BashOrZsh), "{line}");
        }
        for line in [
            "echo 'a !x'",
            "echo \\!x",
            "test ! -f x",
            "[ a != b ]",
            "echo done!",
        ] {
            assert!(!expands_history(line, History::BashOrZsh), "{line}");
        }
    }
}
