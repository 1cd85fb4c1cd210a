//! Walks the `brush-parser` syntax tree down to simple commands, collecting
//! hazards from redirections, assignments and compound commands on the way.

use super::words::{self, WordInfo};
use super::{Collector, Hazard};
use brush_parser::ast::{
    AndOrList, AssignmentName, AssignmentValue, Command, CommandPrefixOrSuffixItem,
    CompoundCommand, CompoundList, ExtendedTestExpr, IoFileRedirectKind, IoFileRedirectTarget,
    IoRedirect, SimpleCommand, SubshellCommand,
};
use brush_parser::{Parser, ParserOptions};

/// Parses `source` as a shell program and walks it. A parse error is a
/// hazard (nothing unparsable is allowed).
pub(crate) fn analyze_program(source: &str, c: &mut Collector) {
    analyze_program_with(source, &parser_options(), c);
}

/// How the analysis reads a line: as bash does with `extglob` off, its
/// default outside interactive shells. With it on, `*(…)` would be read
/// as a pattern, but the agent's shell may be zsh, where `*(e:'cmd':)`
/// is a glob qualifier that runs `cmd`: off, such a word is a syntax
/// error, and a line holding one is never plain (`ls !(x)` asks too).
pub(crate) fn parser_options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        ..ParserOptions::default()
    }
}

/// [`analyze_program`] with the parser's options (`sh_mode` reads as POSIX
/// `sh` does).
pub(crate) fn analyze_program_with(source: &str, options: &ParserOptions, c: &mut Collector) {
    if too_nested(source) {
        c.hazard(Hazard::TooDeep);
        return;
    }
    if huge_redirect_number(source) {
        c.hazard(Hazard::Unparsable {
            message: "a redirection's descriptor number is too large".to_owned(),
        });
        return;
    }
    // Bash reads a control character as part of a word, but a terminal
    // the line is typed into (an agent writing to an interactive session)
    // acts on it: Ctrl-U erases what came before, a carriage return ends
    // the line, ESC [A recalls the last one. And brush-parser trims a
    // here-document's tag of ASCII whitespace, so a tag of a carriage
    // return or form feed is empty, and `a<<\r #` made it allocate without
    // end (cargo fuzz: gigabytes from seven bytes). A line holding any but
    // tab and newline is refused rather than read two ways.
    if source
        .chars()
        .any(|ch| ch.is_ascii_control() && ch != '\t' && ch != '\n')
    {
        c.hazard(Hazard::Unparsable {
            message: "a control character (other than tab and newline)".to_owned(),
        });
        return;
    }
    if heredoc_in_substitution(source) {
        c.hazard(Hazard::Unparsable {
            message: "a here-document inside a substitution".to_owned(),
        });
        return;
    }
    if substitution_after_heredoc_operator(source) {
        c.hazard(Hazard::Unparsable {
            message: "a substitution in a here-document's line".to_owned(),
        });
        return;
    }
    // brush-parser 0.4 panics on some inputs (cargo fuzz found
    // `99999999999>&x`, a descriptor number over i32, unwrapped); a panic
    // in the parser is an unparsable command, never a crash.
    let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Parser::new(source.as_bytes(), options).parse_program()
    }));
    match parsed {
        Ok(Ok(program)) => {
            for list in &program.complete_commands {
                compound_list(list, c);
            }
        }
        Ok(Err(e)) => c.hazard(Hazard::Unparsable {
            message: e.to_string(),
        }),
        Err(_) => c.hazard(Hazard::Unparsable {
            message: "the parser failed".to_owned(),
        }),
    }
}

/// A here-document operator (`<<`, `<<-`, not `<<<`) anywhere after the
/// first `$(`, `$((` or `$[`: brush-parser's tokenizer reads those
/// constructs in a loop that mishandles a here-document left open in them
/// (cargo fuzz: `$(<<E)$(\nE` panicked, `$(<<  $(` allocated gigabytes).
/// Such a line holds a substitution, so it asks anyway; refusing to parse
/// it costs nothing but the structure, and the search for hidden commands
/// still shows deny patterns what it runs.
fn heredoc_in_substitution(source: &str) -> bool {
    let bytes = source.as_bytes();
    let Some(first) = bytes
        .windows(2)
        .position(|w| matches!(w, [b'$', b'(' | b'[']))
    else {
        return false;
    };
    let after = bytes.get(first..).unwrap_or_default();
    after.windows(3).enumerate().any(|(i, w)| {
        w.starts_with(b"<<")
            && w.get(2) != Some(&b'<')
            && (i == 0 || after.get(i - 1) != Some(&b'<'))
    }) || after.ends_with(b"<<")
}

/// A `$(` or `$[` after a `<<` on the same line, neither in single
/// quotes. brush-parser reads a substitution glued to a here-document's tag
/// as the tag (bash takes the whole word literally), and one left open
/// there makes it allocate without end (cargo fuzz: `<<<<<<lfahho$(  `
/// took gigabytes in sh mode, where `<<<` is `<<` and `<`; `cat <<E$(  `
/// does in bash mode). Every `<<`, here-strings' included, counts, and a
/// quote left open is read as code: such a line holds a substitution or
/// arithmetic, which asks anyway.
pub(super) fn substitution_after_heredoc_operator(source: &str) -> bool {
    let bytes = source.as_bytes();
    let (mut i, mut double, mut operator) = (0, false, false);
    while let Some(&b) = bytes.get(i) {
        let next = bytes.get(i + 1).copied();
        match b {
            b'\\' => i += 1,
            b'\'' if !double => {
                if let Some(len) = memchr::memchr(b'\'', bytes.get(i + 1..).unwrap_or_default()) {
                    i += len + 1;
                }
            }
            b'"' => double = !double,
            b'\n' if !double => operator = false,
            b'<' if next == Some(b'<') => operator = true,
            b'$' if operator && matches!(next, Some(b'(' | b'[')) => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// A run of more than nine digits right before `<` or `>`: brush-parser
/// reads it as a descriptor number into an `i32` and panics if it does not
/// fit.
fn huge_redirect_number(source: &str) -> bool {
    let mut digits = 0;
    for b in source.bytes() {
        if b.is_ascii_digit() {
            digits += 1;
        } else {
            if digits > 9 && matches!(b, b'<' | b'>') {
                return true;
            }
            digits = 0;
        }
    }
    false
}

/// Most constructs that can nest a parser allows in one command. The parser
/// and this walk recurse once per level; without a bound, a few thousand
/// nested braces (or `!`s inside `[[ ]]`) overflow the stack and abort the
/// process.
pub(crate) const MAX_OPENERS: usize = 32;

/// The deepest nesting of `(` (closed or not) a parsed line may reach:
/// brush-parser takes time exponential in the number of `(` it has open at
/// a syntax error (cargo fuzz found 29 in a 36-byte line that took
/// seconds; each further one doubled it). At this depth the worst line of
/// [`super::MAX_LEN`] bytes parses in about three times the time of a
/// line without parentheses.
pub(crate) const MAX_PAREN_DEPTH: usize = 8;

/// How deep `(` nests in `source`, quoting ignored (which errs towards
/// refusing).
fn paren_depth(source: &str) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0;
    for b in source.bytes() {
        match b {
            b'(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The most expansions with a subscript (`${x[…]}`) a parsed line may
/// hold.
const MAX_SUBSCRIPTED: usize = 2;

/// Whether expansions with a subscript (`${x[…]}`, `${!x[…]}`) might nest
/// (`${x[${y[…]}]}`, `${a:-${x[…]}}`) or there are more than
/// [`MAX_SUBSCRIPTED`]: brush-parser's word parser takes time exponential
/// in how deep they nest (cargo fuzz found five unclosed ones in a
/// here-document taking half a second, and seven take minutes; two over a
/// long subscript take milliseconds a kilobyte). Quoting is ignored, and
/// inside a subscript only `]` closes (a `}` there does not end the
/// expansion); since a quoted `]` could still fool that, the count bounds
/// the depth whatever the nesting looks like.
fn nested_subscript(source: &str) -> bool {
    #[derive(PartialEq)]
    enum Open {
        Brace,
        Bracket,
    }
    let bytes = source.as_bytes();
    let mut open: Vec<Open> = Vec::new();
    let mut subscripted = 0;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                i += 2;
                if matches!(bytes.get(i), Some(b'!' | b'#')) {
                    i += 1;
                }
                let name = bytes
                    .get(i..)
                    .unwrap_or_default()
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                    .count();
                let subscript = name > 0 && bytes.get(i + name) == Some(&b'[');
                if subscript {
                    subscripted += 1;
                    if !open.is_empty() || subscripted > MAX_SUBSCRIPTED {
                        return true;
                    }
                }
                open.push(Open::Brace);
                if subscript {
                    open.push(Open::Bracket);
                    i += name + 1;
                }
                continue;
            }
            b']' if open.last() == Some(&Open::Bracket) => {
                open.pop();
            }
            b'}' if open.last() == Some(&Open::Brace) => {
                open.pop();
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// Whether `source` might nest deeper than [`MAX_OPENERS`] (or `(` deeper
/// than [`MAX_PAREN_DEPTH`], or a subscripted expansion inside another,
/// see [`nested_subscript`]). Counts every
/// opener rather than the depth (quotes are ignored), so it errs towards
/// refusing, which only costs a question. Inside `[[ ]]` the parser also
/// recurses on `!`, `&&` and `||`, so where `[[` appears those count too.
pub(crate) fn too_nested(source: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "if", "while", "until", "for", "case", "select", "function", "coproc",
    ];
    let bytes = source.as_bytes();
    let mut count = bytes
        .iter()
        .filter(|b| matches!(b, b'(' | b'{' | b'`'))
        .count();
    // `$[` nests like `$((`, and every `[` makes the word parser look
    // ahead for its `]` (a line of `a[a[a[…` took seconds), so they count
    // too, with room for ordinary tests and character classes.
    // Stray `)` and long runs of redirections cost the parser more than
    // linear time too (milliseconds per 8 KiB).
    let budget = |set: &[u8]| bytes.iter().filter(|b| set.contains(b)).count() > 2 * MAX_OPENERS;
    if count > MAX_OPENERS || budget(b"[") || budget(b")") || budget(b"<>") {
        return true;
    }
    if paren_depth(source) > MAX_PAREN_DEPTH || nested_subscript(source) {
        return true;
    }
    if source.contains("[[") {
        count += bytes.iter().filter(|&&b| b == b'!').count();
        count += bytes
            .windows(2)
            .filter(|w| matches!(w, [b'&', b'&'] | [b'|', b'|']))
            .count();
        if count > MAX_OPENERS {
            return true;
        }
    }
    let keywords = source
        .split(|ch: char| !ch.is_ascii_alphanumeric() && ch != '_')
        .filter(|w| KEYWORDS.contains(w))
        .count();
    count + keywords > MAX_OPENERS
}

fn compound_list(list: &CompoundList, c: &mut Collector) {
    for item in &list.0 {
        and_or(&item.0, c);
    }
}

fn and_or(list: &AndOrList, c: &mut Collector) {
    for (_, pipeline) in list {
        for command in &pipeline.seq {
            self::command(command, c);
        }
    }
}

fn command(command: &Command, c: &mut Collector) {
    match command {
        Command::Simple(simple) => simple_command(simple, c),
        Command::Compound(compound, redirects) => {
            compound_command(compound, c);
            for r in redirects.iter().flat_map(|r| &r.0) {
                redirect(r, c);
            }
        }
        Command::Function(function) => {
            c.repeats = true;
            c.hazard(Hazard::FunctionDefinition {
                name: function.fname.value.clone(),
            });
            compound_command(&function.body.0, c);
            for r in function.body.1.iter().flat_map(|r| &r.0) {
                redirect(r, c);
            }
        }
        Command::ExtendedTest(test, redirects) => {
            // `[[ … ]]` is a command like any other for the patterns: it
            // must not vanish from what they see.
            c.push_command(format!("[[ {} ]]", test.expr));
            extended_test(&test.expr, c);
            for r in redirects.iter().flat_map(|r| &r.0) {
                redirect(r, c);
            }
        }
    }
}

fn compound_command(compound: &CompoundCommand, c: &mut Collector) {
    match compound {
        CompoundCommand::Arithmetic(_) => c.hazard(Hazard::Arithmetic),
        CompoundCommand::ArithmeticForClause(arith) => {
            c.repeats = true;
            c.hazard(Hazard::Arithmetic);
            compound_list(&arith.body.list, c);
        }
        CompoundCommand::BraceGroup(group) => compound_list(&group.list, c),
        CompoundCommand::Subshell(subshell) => compound_list(&subshell.list, c),
        CompoundCommand::ForClause(for_clause) => {
            c.repeats = true;
            // A loop variable is assigned on every iteration; uppercase names
            // could be PATH, IFS, LD_PRELOAD and the like.
            let name = &for_clause.variable_name;
            if !name
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
            {
                c.hazard(Hazard::Assignment { name: name.clone() });
            }
            for value in for_clause.values.iter().flatten() {
                words::analyze(&value.value, c);
            }
            compound_list(&for_clause.body.list, c);
        }
        CompoundCommand::CaseClause(case) => {
            words::analyze(&case.value.value, c);
            for item in &case.cases {
                for pattern in &item.patterns {
                    words::analyze(&pattern.value, c);
                }
                if let Some(body) = &item.cmd {
                    compound_list(body, c);
                }
            }
        }
        CompoundCommand::IfClause(if_clause) => {
            compound_list(&if_clause.condition, c);
            compound_list(&if_clause.then, c);
            for clause in if_clause.elses.iter().flatten() {
                if let Some(condition) = &clause.condition {
                    compound_list(condition, c);
                }
                compound_list(&clause.body, c);
            }
        }
        CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
            c.repeats = true;
            compound_list(&w.0, c);
            compound_list(&w.1.list, c);
        }
        CompoundCommand::Coprocess(coproc) => {
            c.hazard(Hazard::Coprocess);
            command(&coproc.body, c);
        }
    }
}

fn extended_test(expr: &ExtendedTestExpr, c: &mut Collector) {
    use brush_parser::ast::BinaryPredicate as B;
    match expr {
        ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
            extended_test(a, c);
            extended_test(b, c);
        }
        ExtendedTestExpr::Not(a) | ExtendedTestExpr::Parenthesized(a) => extended_test(a, c),
        ExtendedTestExpr::UnaryTest(predicate, word) => {
            let info = words::analyze(&word.value, c);
            // `-v NAME[sub]` and `-R NAME[sub]` evaluate the subscript as
            // arithmetic, quoted or not: `[[ -v 'x[$(id)]' ]]` runs `id`.
            use brush_parser::ast::UnaryPredicate as U;
            if matches!(
                predicate,
                U::ShellVariableIsSetAndAssigned | U::ShellVariableIsSetAndNameRef
            ) && words::may_subscript(&info)
            {
                c.hazard(Hazard::Arithmetic);
            }
        }
        ExtendedTestExpr::BinaryTest(predicate, left, right) => {
            let left = words::analyze(&left.value, c);
            let right = words::analyze(&right.value, c);
            // `[[ $x -eq 1 ]]` evaluates `$x` as arithmetic, which can run
            // commands through array subscripts.
            let arithmetic = matches!(
                predicate,
                B::ArithmeticEqualTo
                    | B::ArithmeticNotEqualTo
                    | B::ArithmeticLessThan
                    | B::ArithmeticLessThanOrEqualTo
                    | B::ArithmeticGreaterThan
                    | B::ArithmeticGreaterThanOrEqualTo
            );
            let numeric = |w: &WordInfo<'_>| {
                w.literal.as_deref().is_some_and(|v| {
                    !v.is_empty()
                        && v.trim_start_matches('-')
                            .chars()
                            .all(|ch| ch.is_ascii_digit())
                })
            };
            if arithmetic && !(numeric(&left) && numeric(&right)) {
                c.hazard(Hazard::Arithmetic);
            }
        }
    }
}

fn simple_command(simple: &SimpleCommand, c: &mut Collector) {
    for item in simple.prefix.iter().flat_map(|p| &p.0) {
        match item {
            CommandPrefixOrSuffixItem::AssignmentWord(assignment, word) => {
                // `LANG=C ls`: a locale before a command is plain; any
                // other variable, or one set for the shell itself, asks.
                let plain = simple.word_or_name.is_some()
                    && match (&assignment.name, &assignment.value) {
                        (AssignmentName::VariableName(name), AssignmentValue::Scalar(value)) => {
                            words::is_plain_prefix_assignment(name, assignment.append, &value.value)
                        }
                        _ => false,
                    };
                if !plain {
                    c.hazard(Hazard::Assignment {
                        name: assignment.name.to_string(),
                    });
                }
                words::analyze(&word.value, c);
            }
            other => prefix_or_suffix_item(other, c),
        }
    }
    let mut args = Vec::new();
    for item in simple.suffix.iter().flat_map(|s| &s.0) {
        match item {
            // `echo a=b`: for ordinary commands an assignment-looking word is
            // just an argument; declaration builtins are judged by name.
            CommandPrefixOrSuffixItem::Word(word)
            | CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                args.push(words::analyze(&word.value, c));
            }
            other => prefix_or_suffix_item(other, c),
        }
    }
    if let Some(name) = &simple.word_or_name {
        let name = words::analyze(&name.value, c);
        c.simple_command(&name, &args);
    }
}

fn prefix_or_suffix_item(item: &CommandPrefixOrSuffixItem, c: &mut Collector) {
    match item {
        CommandPrefixOrSuffixItem::IoRedirect(r) => redirect(r, c),
        CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
            process_substitution(subshell, c)
        }
        CommandPrefixOrSuffixItem::Word(word)
        | CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
            words::analyze(&word.value, c);
        }
    }
}

fn process_substitution(subshell: &SubshellCommand, c: &mut Collector) {
    c.hazard(Hazard::ProcessSubstitution);
    compound_list(&subshell.list, c);
}

/// Targets that discard output or point at the terminal's own streams.
fn harmless_target(target: &str) -> bool {
    matches!(target, "/dev/null" | "/dev/stdout" | "/dev/stderr")
}

/// `/dev/tcp/…` or `/dev/udp/…`, however the slashes are doubled or
/// dotted (bash only knows the plain spelling; the others are refused
/// anyway, since nothing is lost).
fn is_network(target: &str) -> bool {
    let mut path = String::with_capacity(target.len());
    for part in target.split('/').filter(|p| !p.is_empty() && *p != ".") {
        path.push('/');
        path.push_str(part);
    }
    path.starts_with("/dev/tcp") || path.starts_with("/dev/udp")
}

/// `2>&1`, `>&2`, `<&0`, `>&-`, `>&2-`: duplicating or closing descriptors.
fn is_descriptor(target: &str) -> bool {
    let digits = target.strip_suffix('-').unwrap_or(target);
    target == "-" || (!digits.is_empty() && digits.chars().all(|ch| ch.is_ascii_digit()))
}

fn redirect(r: &IoRedirect, c: &mut Collector) {
    match r {
        IoRedirect::File(_, kind, target) => match target {
            IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                process_substitution(subshell, c)
            }
            IoFileRedirectTarget::Fd(_) => {}
            IoFileRedirectTarget::Filename(word) => {
                let info = words::analyze(&word.value, c);
                // Bash opens a socket for `/dev/tcp/host/port`, reading or
                // writing; a target known only at run time could be one.
                match info.literal.as_deref() {
                    Some(target) if is_network(target) => c.hazard(Hazard::Network {
                        target: word.value.clone(),
                    }),
                    None => c.hazard(Hazard::FileRedirect {
                        target: word.value.clone(),
                    }),
                    Some(_) => {}
                }
                let writes = !matches!(
                    kind,
                    IoFileRedirectKind::Read | IoFileRedirectKind::DuplicateInput
                );
                if writes && !info.literal.as_deref().is_some_and(harmless_target) {
                    c.hazard(Hazard::FileRedirect {
                        target: word.value.clone(),
                    });
                }
            }
            IoFileRedirectTarget::Duplicate(word) => {
                let info = words::analyze(&word.value, c);
                // `>&file` sends stdout and stderr to a file.
                if !info
                    .literal
                    .as_deref()
                    .is_some_and(|t| is_descriptor(t) || harmless_target(t))
                {
                    c.hazard(Hazard::FileRedirect {
                        target: word.value.clone(),
                    });
                }
            }
        },
        IoRedirect::OutputAndError(word, _) => {
            let info = words::analyze(&word.value, c);
            if info.literal.as_deref().is_some_and(is_network) {
                c.hazard(Hazard::Network {
                    target: word.value.clone(),
                });
            }
            if !info.literal.as_deref().is_some_and(harmless_target) {
                c.hazard(Hazard::FileRedirect {
                    target: word.value.clone(),
                });
            }
        }
        IoRedirect::HereDocument(_, doc) => {
            if doc.requires_expansion {
                words::analyze_heredoc(&doc.doc.value, c);
            }
        }
        IoRedirect::HereString(_, word) => {
            words::analyze(&word.value, c);
        }
    }
}
