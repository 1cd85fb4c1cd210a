//! Commands that a line may run but that the walk of its syntax tree does
//! not list: substitutions inside parameter expansions (`${x:-$(cmd)}`,
//! `${x/a/$(cmd)}`), arithmetic (`$(( $(cmd) ))`, `(( a[$(cmd)] ))`),
//! subscripts that bash evaluates even when quoted (`[[ -v 'a[$(cmd)]' ]]`),
//! and the commands that runners run (`sudo cmd`, `env cmd`, `eval 'cmd'`,
//! `bash -c 'cmd'`, `find -exec cmd`).
//!
//! Each construct holding them is already a hazard, so the line is never
//! allowed; what is found here is only shown to deny patterns (deny is the
//! strongest answer, and nothing may hide a command from it). The search
//! errs towards finding too much: it reads raw text whatever the quoting
//! (`echo '$(rm x)' > f` "hides" `rm x`) and takes every argument of a
//! runner that could be a command name as the start of one (`sudo -u root
//! rm x` hides `root rm x` and `rm x`). That only costs a denial of a line
//! that needed a human anyway.

use super::words::{self, WordInfo};
use super::{Collector, Hazard, MAX_DEPTH, MAX_LEN, walk};

/// The most bytes the search reads and writes for one line, over every
/// candidate end of every substitution it tries and every runner's
/// arguments: a line full of `$(` and `)`, or of arguments, would
/// otherwise take time and memory quadratic in its length. Running out is
/// a hazard.
const BUDGET: usize = 4 * MAX_LEN;

/// The most substitutions the search looks into (the parser refuses a
/// line with more openers than this anyway).
const MAX_SUBSTITUTIONS: usize = 2 * walk::MAX_OPENERS;

/// Takes `bytes` from the budget; false (and a hazard) if it ran out.
fn spend(c: &mut Collector, bytes: usize) -> bool {
    match c.hidden_spent.checked_add(bytes) {
        Some(spent) if spent <= BUDGET => {
            c.hidden_spent = spent;
            true
        }
        _ => {
            c.hazard(Hazard::TooLong);
            false
        }
    }
}

/// Finds every `$(…)`, `<(…)`, `>(…)` and `` `…` `` in `source`, quoted
/// or not, analyses what it holds, and records every command found that
/// the collector does not list yet as hidden.
pub(super) fn scan(source: &str, c: &mut Collector) {
    let bytes = source.as_bytes();
    // Where each substitution's text starts, and the byte that may end it.
    let mut starts = Vec::new();
    for (at, &b) in bytes.iter().enumerate() {
        match b {
            b'(' if at > 0 && matches!(bytes.get(at - 1), Some(b'$' | b'<' | b'>')) => {
                starts.push((at + 1, b')'));
            }
            b'`' if !escaped(bytes, at) => starts.push((at + 1, b'`')),
            _ => {}
        }
        if starts.len() > MAX_SUBSTITUTIONS {
            c.hazard(Hazard::TooDeep);
            return;
        }
    }
    for (start, close) in starts {
        let ends = bytes
            .get(start..)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter(|&(i, &b)| b == close && (close != b'`' || !escaped(bytes, start + i)))
            .map(|(i, _)| start + i);
        if !substitution(source, start, ends, c) {
            return;
        }
    }
}

/// Whether the byte at `at` follows an odd number of backslashes.
fn escaped(bytes: &[u8], at: usize) -> bool {
    bytes
        .get(..at)
        .unwrap_or_default()
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count()
        % 2
        == 1
}

/// Analyses the substitution whose text starts at `start` and ends at the
/// first of `ends` that gives a program the parser takes (as the shell
/// does, which ends it where its own parse ends); if none does, the text
/// up to the first end is recorded as it is. False if the budget ran out.
fn substitution(
    source: &str,
    start: usize,
    ends: impl Iterator<Item = usize>,
    c: &mut Collector,
) -> bool {
    let mut first = None;
    for end in ends {
        let Some(inner) = source.get(start..end) else {
            continue;
        };
        first.get_or_insert(inner);
        if !spend(c, inner.len()) {
            return false;
        }
        match program(inner, c) {
            Parsed::Yes => return true,
            Parsed::TooDeep => {
                c.hazard(Hazard::TooDeep);
                return true;
            }
            Parsed::No => {}
        }
    }
    let raw = first.or_else(|| source.get(start..)).unwrap_or_default();
    let raw = raw.trim();
    if !raw.is_empty() {
        c.hide(raw.to_owned());
    }
    true
}

/// What [`program`] made of a text.
enum Parsed {
    Yes,
    No,
    TooDeep,
}

/// Analyses `text` as a program one level down and hides the commands it
/// runs, if the parser takes it.
fn program(text: &str, c: &mut Collector) -> Parsed {
    if c.depth >= MAX_DEPTH {
        return Parsed::TooDeep;
    }
    // Read as the tool reads it: for the git tool, a git command hidden
    // in an alias or a runner is shown to deny patterns in canonical form.
    let mut scratch = Collector {
        depth: c.depth + 1,
        hidden_spent: c.hidden_spent,
        git_tool: c.git_tool,
        ..Collector::default()
    };
    walk::analyze_program(text, &mut scratch);
    c.hidden_spent = scratch.hidden_spent;
    if scratch.hazards.contains(&Hazard::TooDeep) {
        return Parsed::TooDeep;
    }
    if scratch
        .hazards
        .iter()
        .any(|h| matches!(h, Hazard::Unparsable { .. }))
    {
        return Parsed::No;
    }
    for command in scratch.commands.into_iter().chain(scratch.hidden) {
        c.hide(command);
    }
    if scratch.hazards.contains(&Hazard::TooLong) {
        c.hazard(Hazard::TooLong);
    }
    Parsed::Yes
}

/// Hides what a runner's arguments may run: each argument that is code
/// (`-c 'rm x'`, `eval 'rm x'`, also after a `key=` and a git alias's
/// `!`: `core.pager='rm x'`, `alias.x='!rm x'`) read as a program, and
/// each run of arguments from one that could be a command name or a
/// program's path on (`sudo -u root rm x`: `root rm x`, `rm x`).
pub(super) fn arguments(args: &[WordInfo<'_>], c: &mut Collector) {
    for (i, arg) in args.iter().enumerate() {
        if let Some(literal) = arg.literal.as_deref() {
            let value = literal.split_once('=').map(|(_, v)| v);
            for text in [Some(literal), value].into_iter().flatten() {
                let text = text.strip_prefix('!').unwrap_or(text);
                if !spend(c, text.len()) {
                    return;
                }
                if text.contains(|ch: char| ch.is_whitespace() || ";&|<>()`$".contains(ch)) {
                    if let Parsed::TooDeep = program(text, c) {
                        c.hazard(Hazard::TooDeep);
                    }
                } else if text != literal && words::command_name(&words::plain(text)).is_ok() {
                    c.hide(text.to_owned());
                }
            }
        }
        // A program named by its path starts one too (`sudo /bin/rm x`).
        if matches!(
            words::command_name(arg),
            Ok(_) | Err(Hazard::PathCommandName { .. })
        ) {
            let rest = args.get(i..).unwrap_or_default();
            let mut text = String::new();
            for (j, word) in rest.iter().enumerate() {
                if j > 0 {
                    text.push(' ');
                }
                words::render(word, &mut text);
            }
            if !spend(c, text.len()) {
                return;
            }
            c.hide(text);
        }
    }
}
