//! Patterns that are a literal followed by `.*` (or by nothing), matched
//! without a regex engine. The literal may hold small alternations
//! (`tool:(bash|sh):(ls|cat)`, expanded into one literal each) and the tail
//! may be optional (`( .*)?`, as in the `readonly` preset).
//!
//! `tool:file:.*` full-matches a string exactly when the string starts with
//! `tool:file:` and the rest holds no `\n` (Unicode `.` matches any
//! character but `\n`; under `(?s)` it matches anything). A lazy DFA walks
//! every byte of the input through `.`; a prefix test and one `memrchr` do
//! not. Such patterns are recognised on the parsed syntax tree (so escapes,
//! groups and flags are read exactly as the regex crate reads them) and kept
//! in a compressed byte trie, so a profile of 200 such prefixes costs one
//! walk over the first bytes of the input, not 200 tests. (Not a sorted list and binary
//! search: every comparison is a `memcmp` call, and `memcmp` on the empty,
//! dangling slice of an empty `String` took about 100 ns here.)

use super::negated::Absent;
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Class, Dot, Hir, HirKind};

/// Alternations expand into at most this many literals; larger ones are
/// left to the regex engine.
const MAX_LITERALS: usize = 64;

/// Character classes expand into their characters up to this many.
const MAX_CLASS_CHARS: usize = 16;

/// What may follow the literal for the whole input to match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tail {
    /// Nothing: the pattern is a plain literal.
    Nothing,
    /// At least `min` characters, none of them `\n` unless `dotall`.
    Any {
        /// `(?s)`: `.` matches `\n` too.
        dotall: bool,
        /// The least number of characters (`.*` is 0, `.+` is 1).
        min: usize,
    },
    /// `(<text>.*)?`: nothing, or `text` followed by at least `min`
    /// characters, none of them `\n` unless `dotall`.
    OptionalAny {
        /// What the optional part starts with.
        text: Box<str>,
        /// `(?s)`: `.` matches `\n` too.
        dotall: bool,
        /// The least number of characters after `text`.
        min: usize,
    },
}

/// A pattern of the form `<literal><tail>`, where the literal is one of a
/// few alternatives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LiteralPattern {
    /// The alternatives, without duplicates, in the order written.
    pub(super) literals: Vec<String>,
    pub(super) tail: Tail,
    /// For `<literal>(?!<text>)<tail>`: what must not follow the literal.
    pub(super) not_followed_by: Option<String>,
    /// For `<literal>(?!.*<regex>).*`: what must not occur anywhere after
    /// the literal.
    pub(super) absent: Option<Absent>,
}

/// Parses `pattern` as the regex crate does and returns it as a literal and
/// a tail, if it has that form.
pub(super) fn literal_pattern(pattern: &str) -> Option<LiteralPattern> {
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    from_hir(&hir)
}

/// Recognises `<A>(?!<B>)<C>` where `A` and `B` are literals and `<A><C>`
/// is a literal pattern with no more literal text: like `tool:git:(?!push).*`
/// (`standard`'s git rule). It full-matches exactly when the input starts
/// with `A`, what follows does not start with `B`, and the tail matches.
///
/// Each part is checked with the parser, so that flags and escapes of `A`
/// carry over as the regex engine reads them: `A` alone and `<A><B>` must be
/// plain literals, `B` alone must read as the same literal as it does after
/// `A` (so `(?x)` or a quantifier binding to `A` are refused), and `<A><C>`
/// must have `A`'s literal and a tail. Anything else is left to
/// fancy-regex.
pub(super) fn lookahead_pattern(pattern: &str) -> Option<LiteralPattern> {
    let (a, rest) = pattern.split_once("(?!")?;
    let (b, c) = rest.split_once(')')?;
    let exact = |p: &str| match literal_pattern(p)? {
        LiteralPattern {
            mut literals,
            tail: Tail::Nothing,
            ..
        } if literals.len() == 1 => literals.pop(),
        _ => None,
    };
    let first = exact(a)?;
    let forbidden = exact(b)?;
    if exact(&format!("{a}{b}"))? != format!("{first}{forbidden}") {
        return None;
    }
    let whole = literal_pattern(&format!("{a}{c}"))?;
    if whole.literals != [first] {
        return None;
    }
    Some(LiteralPattern {
        not_followed_by: Some(forbidden),
        ..whole
    })
}

fn from_hir(hir: &Hir) -> Option<LiteralPattern> {
    // A capture group around the whole pattern changes nothing for a
    // full match.
    if let HirKind::Capture(capture) = hir.kind() {
        return from_hir(&capture.sub);
    }
    let items = match hir.kind() {
        HirKind::Concat(items) => items.as_slice(),
        _ => std::slice::from_ref(hir),
    };
    // The longest run of leading items that are literals or small
    // alternations of literals; what follows must be one tail item.
    let mut literals = vec![String::new()];
    let mut rest = items;
    while let Some((first, after)) = rest.split_first() {
        let Some(alternatives) = literal_set(first) else {
            break;
        };
        literals = product(&literals, &alternatives)?;
        rest = after;
    }
    let tail = match rest {
        [] => Tail::Nothing,
        [last] => dot_star(last).or_else(|| optional_any(last))?,
        _ => return None,
    };
    Some(LiteralPattern {
        literals,
        tail,
        not_followed_by: None,
        absent: None,
    })
}

/// The strings `hir` matches, if it matches only a few literal strings.
fn literal_set(hir: &Hir) -> Option<Vec<String>> {
    match hir.kind() {
        HirKind::Empty => Some(vec![String::new()]),
        HirKind::Literal(lit) => Some(vec![String::from_utf8(lit.0.to_vec()).ok()?]),
        HirKind::Capture(capture) => literal_set(&capture.sub),
        HirKind::Class(Class::Unicode(class)) => {
            let mut chars = Vec::new();
            for range in class.ranges() {
                for c in range.start()..=range.end() {
                    if chars.len() == MAX_CLASS_CHARS {
                        return None;
                    }
                    chars.push(c.to_string());
                }
            }
            Some(chars)
        }
        HirKind::Concat(items) => items.iter().try_fold(vec![String::new()], |acc, item| {
            product(&acc, &literal_set(item)?)
        }),
        HirKind::Alternation(alternatives) => {
            let mut all: Vec<String> = Vec::new();
            for alternative in alternatives {
                for s in literal_set(alternative)? {
                    if !all.contains(&s) {
                        all.push(s);
                    }
                }
                if all.len() > MAX_LITERALS {
                    return None;
                }
            }
            Some(all)
        }
        _ => None,
    }
}

/// Every `a` followed by every `b`, without duplicates; `None` past
/// [`MAX_LITERALS`].
fn product(heads: &[String], tails: &[String]) -> Option<Vec<String>> {
    if heads.len().saturating_mul(tails.len()) > MAX_LITERALS {
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(heads.len() * tails.len());
    for head in heads {
        for tail in tails {
            let s = format!("{head}{tail}");
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    Some(out)
}

/// `(<literal>.*)?` (greedy or lazy, the group capturing or not).
fn optional_any(hir: &Hir) -> Option<Tail> {
    let HirKind::Repetition(rep) = hir.kind() else {
        return None;
    };
    if rep.min != 0 || rep.max != Some(1) {
        return None;
    }
    let inner = from_hir(&rep.sub)?;
    let ([text], Tail::Any { dotall, min }) = (inner.literals.as_slice(), inner.tail) else {
        return None;
    };
    Some(Tail::OptionalAny {
        text: text.as_str().into(),
        dotall,
        min,
    })
}

/// `.*`, `.+`, `.{n,}` (lazy or greedy), with or without `(?s)`.
fn dot_star(hir: &Hir) -> Option<Tail> {
    let HirKind::Repetition(rep) = hir.kind() else {
        return None;
    };
    if rep.max.is_some() {
        return None;
    }
    let dotall = if *rep.sub == Hir::dot(Dot::AnyCharExceptLF) {
        false
    } else if *rep.sub == Hir::dot(Dot::AnyChar) {
        true
    } else {
        return None;
    };
    Some(Tail::Any {
        dotall,
        min: usize::try_from(rep.min).ok()?,
    })
}

/// Literal texts one of which every full match of `pattern` starts with, or
/// `None` if nothing is known (then any input may match). Used to prove
/// that a pattern can never match strings starting with some text.
pub(super) fn possible_starts(pattern: &str) -> Option<Vec<String>> {
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
    seq.literals()?
        .iter()
        .map(|lit| String::from_utf8(lit.as_bytes().to_vec()).ok())
        .collect()
}

/// One pattern of the index.
#[derive(Debug, Clone)]
struct Member {
    /// The pattern's index in its [`super::PatternSet`].
    index: usize,
    tail: Tail,
    not_followed_by: Option<Box<str>>,
    absent: Option<Absent>,
}

/// A node of the trie as it is built, one byte per edge.
#[derive(Debug, Clone, Default)]
struct ByteNode {
    /// The next byte and the node it leads to, sorted by byte.
    children: Vec<(u8, usize)>,
    /// The patterns whose literal ends here, lowest index first.
    members: Vec<Member>,
}

/// A node of the compressed trie: the literal that is the labels on the
/// path to it.
#[derive(Debug, Clone, Default)]
struct Node {
    /// The bytes from the parent to this node (empty for the root): runs
    /// of nodes with one child and no pattern are merged, so that walking
    /// `tool:file:` is one comparison, not ten steps.
    label: Label,
    /// The first byte of each child's label, sorted.
    child_bytes: Box<[u8]>,
    /// The children, in the order of `child_bytes`.
    children: Box<[usize]>,
    /// The patterns whose literal ends here, lowest index first.
    members: Vec<Member>,
}

impl Node {
    /// The child whose label starts with `byte`: a scan of a few bytes
    /// (most nodes have a handful of children), a binary search of more.
    fn child(&self, byte: u8) -> Option<usize> {
        let i = if self.child_bytes.len() <= 16 {
            self.child_bytes.iter().position(|&b| b == byte)?
        } else {
            self.child_bytes.binary_search(&byte).ok()?
        };
        self.children.get(i).copied()
    }
}

/// A node's label, also as numbers of eight bytes so that it is compared
/// with the input a word at a time.
#[derive(Debug, Clone, Default)]
struct Label {
    bytes: Box<[u8]>,
    /// The label in little-endian words, the last one zero past the end.
    words: Box<[u64]>,
    /// Ones over the bytes of the last word that belong to the label.
    mask: u64,
}

impl Label {
    fn new(bytes: Vec<u8>) -> Self {
        let (full, rest) = bytes.as_chunks::<8>();
        let mut words: Vec<u64> = full.iter().map(|w| u64::from_le_bytes(*w)).collect();
        let mut mask = u64::MAX;
        if !rest.is_empty() {
            let mut last = [0; 8];
            let mut ones = [0; 8];
            for ((l, o), b) in last.iter_mut().zip(&mut ones).zip(rest) {
                *l = *b;
                *o = 0xff;
            }
            words.push(u64::from_le_bytes(last));
            mask = u64::from_le_bytes(ones);
        }
        Label {
            bytes: bytes.into_boxed_slice(),
            words: words.into_boxed_slice(),
            mask,
        }
    }

    /// Whether `hay` starts with the label: word by word where `hay` has
    /// a whole word under each (the last one masked), else byte by byte.
    fn starts(&self, hay: &[u8]) -> bool {
        let (chunks, _) = hay.as_chunks::<8>();
        let Some((last, full)) = self.words.split_last() else {
            return true;
        };
        match (full, chunks.first()) {
            // The common case: a label of at most eight bytes.
            ([], Some(chunk)) => u64::from_le_bytes(*chunk) & self.mask == *last,
            _ => self.starts_long(hay),
        }
    }

    /// [`Label::starts`] for a label of more than eight bytes, or a short
    /// `hay`.
    fn starts_long(&self, hay: &[u8]) -> bool {
        let (chunks, _) = hay.as_chunks::<8>();
        let Some((last, full)) = self.words.split_last() else {
            return true;
        };
        match chunks.get(full.len()) {
            Some(chunk) => {
                u64::from_le_bytes(*chunk) & self.mask == *last
                    && full
                        .iter()
                        .zip(chunks)
                        .all(|(word, chunk)| u64::from_le_bytes(*chunk) == *word)
            }
            None => starts_with(hay, &self.bytes),
        }
    }
}

/// `hay.starts_with(needle)` without a call: the texts compared here are a
/// few bytes long, and a `memcmp` call for each cost more than comparing
/// them.
fn starts_with(hay: &[u8], needle: &[u8]) -> bool {
    let Some(hay) = hay.get(..needle.len()) else {
        return false;
    };
    let (hay_words, hay_rest) = hay.as_chunks::<8>();
    let (needle_words, needle_rest) = needle.as_chunks::<8>();
    hay_words
        .iter()
        .zip(needle_words)
        .all(|(h, n)| u64::from_le_bytes(*h) == u64::from_le_bytes(*n))
        && hay_rest.iter().zip(needle_rest).all(|(h, n)| h == n)
}

/// Literal patterns in a compressed byte trie, so that the literals that
/// start an input are found in one walk over the input's first bytes,
/// however many patterns there are.
#[derive(Debug, Clone)]
pub(super) struct PrefixIndex {
    /// `nodes[0]` is the root (the empty literal).
    nodes: Vec<Node>,
}

impl PrefixIndex {
    /// Builds the index from `(index, pattern)` pairs in increasing index
    /// order.
    pub(super) fn new(patterns: Vec<(usize, LiteralPattern)>) -> Self {
        // Indexing below cannot panic: every index stored in `children` was
        // the length of the vector just before the node was pushed.
        let mut trie = vec![ByteNode::default()];
        for (index, p) in patterns {
            for literal in &p.literals {
                let mut at = 0;
                for &byte in literal.as_bytes() {
                    let next = trie.len();
                    let node = &mut trie[at];
                    at = match node.children.binary_search_by_key(&byte, |&(b, _)| b) {
                        Ok(i) => node.children[i].1,
                        Err(i) => {
                            node.children.insert(i, (byte, next));
                            trie.push(ByteNode::default());
                            next
                        }
                    };
                }
                trie[at].members.push(Member {
                    index,
                    tail: p.tail.clone(),
                    not_followed_by: p.not_followed_by.clone().map(String::into_boxed_str),
                    absent: p.absent.clone(),
                });
            }
        }
        let mut nodes = vec![Node {
            members: std::mem::take(&mut trie[0].members),
            ..Node::default()
        }];
        // (node in `trie`, the same node in `nodes`)
        let mut stack = vec![(0, 0)];
        while let Some((from, to)) = stack.pop() {
            let mut child_bytes = Vec::new();
            let mut children = Vec::new();
            for (byte, mut child) in std::mem::take(&mut trie[from].children) {
                let mut label = vec![byte];
                while trie[child].members.is_empty() && trie[child].children.len() == 1 {
                    let (next_byte, next) = trie[child].children[0];
                    label.push(next_byte);
                    child = next;
                }
                let id = nodes.len();
                nodes.push(Node {
                    label: Label::new(label),
                    members: std::mem::take(&mut trie[child].members),
                    ..Node::default()
                });
                child_bytes.push(byte);
                children.push(id);
                stack.push((child, id));
            }
            nodes[to].child_bytes = child_bytes.into_boxed_slice();
            nodes[to].children = children.into_boxed_slice();
        }
        PrefixIndex { nodes }
    }

    /// True if the index holds no pattern.
    pub(super) fn is_empty(&self) -> bool {
        self.nodes
            .first()
            .is_none_or(|root| root.children.is_empty() && root.members.is_empty())
    }

    /// The lowest index of a pattern that matches the whole of `input`;
    /// `single_line` says that the caller knows `input` holds no `\n`.
    pub(super) fn first_match(&self, input: &str, single_line: bool) -> Option<usize> {
        let mut best: Option<usize> = None;
        self.visit(input, single_line, |index| {
            best = Some(best.map_or(index, |b| b.min(index)));
            false
        });
        best
    }

    /// The index of some pattern that matches the whole of `input`
    /// (`single_line` as for [`PrefixIndex::first_match`]).
    pub(super) fn any_match(&self, input: &str, single_line: bool) -> Option<usize> {
        let mut found = None;
        self.visit(input, single_line, |index| {
            found = Some(index);
            true
        });
        found
    }

    /// Walks the trie along `input` and calls `hit` with the lowest
    /// matching index of every node whose literal starts `input`, shortest
    /// literal first, until `hit` returns true.
    fn visit(&self, input: &str, single_line: bool, mut hit: impl FnMut(usize) -> bool) {
        let bytes = input.as_bytes();
        // Where the last `\n` is, found on first need.
        let mut last_newline: Option<Option<usize>> = single_line.then_some(None);
        let Some(mut node) = self.nodes.first() else {
            return;
        };
        // The length of `node`'s literal, which `input` starts with.
        let mut len = 0;
        loop {
            if !node.members.is_empty() {
                let rest = bytes.get(len..).unwrap_or_default();
                // Whether `input[from..]` is at least `min` characters, none
                // of them `\n` unless `dotall`.
                let mut any = |from: usize, dotall: bool, min: usize| {
                    let no_newline = dotall || {
                        let last =
                            *last_newline.get_or_insert_with(|| memchr::memrchr(b'\n', bytes));
                        last.is_none_or(|at| at < from)
                    };
                    // `from` is a character boundary: it ends a literal
                    // (valid UTF-8) that `input` starts with.
                    no_newline
                        && (min == 0
                            || input
                                .get(from..)
                                .is_some_and(|s| s.chars().nth(min - 1).is_some()))
                };
                let matched = node.members.iter().find(|m| {
                    let tail = match &m.tail {
                        Tail::Nothing => rest.is_empty(),
                        Tail::Any { dotall, min } => any(len, *dotall, *min),
                        Tail::OptionalAny { text, dotall, min } => {
                            rest.is_empty()
                                || (starts_with(rest, text.as_bytes())
                                    && any(len + text.len(), *dotall, *min))
                        }
                    };
                    tail && m
                        .not_followed_by
                        .as_deref()
                        .is_none_or(|text| !starts_with(rest, text.as_bytes()))
                        && m.absent.as_ref().is_none_or(|a| !a.occurs(input, len))
                });
                if let Some(m) = matched
                    && hit(m.index)
                {
                    return;
                }
            }
            let Some(rest) = bytes.get(len..) else {
                return;
            };
            let Some(next) = rest
                .first()
                .and_then(|&byte| node.child(byte))
                .and_then(|child| self.nodes.get(child))
            else {
                return;
            };
            if !next.label.starts(rest) {
                return;
            }
            node = next;
            len += next.label.bytes.len();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn lit(literal: &str, tail: Tail) -> Option<LiteralPattern> {
        Some(LiteralPattern {
            literals: vec![literal.to_owned()],
            tail,
            not_followed_by: None,
            absent: None,
        })
    }

    const DOT: Tail = Tail::Any {
        dotall: false,
        min: 0,
    };
    const DOTALL: Tail = Tail::Any {
        dotall: true,
        min: 0,
    };

    #[test]
    fn literal_patterns_are_recognised() {
        assert_eq!(literal_pattern("tool:file:.*"), lit("tool:file:", DOT));
        assert_eq!(literal_pattern(r"tool:a\.b:.*?"), lit("tool:a.b:", DOT));
        assert_eq!(literal_pattern("(?s)tool:x:.*"), lit("tool:x:", DOTALL));
        assert_eq!(literal_pattern("tool:(?s:.*)"), lit("tool:", DOTALL));
        assert_eq!(literal_pattern("(?s).*"), lit("", DOTALL));
        assert_eq!(literal_pattern(".*"), lit("", DOT));
        assert_eq!(literal_pattern("(?:ab)c.*"), lit("abc", DOT));
        assert_eq!(literal_pattern("(abc.*)"), lit("abc", DOT));
        assert_eq!(
            literal_pattern("ab.+"),
            lit(
                "ab",
                Tail::Any {
                    dotall: false,
                    min: 1
                }
            )
        );
        assert_eq!(
            literal_pattern("tool:self_edit:x"),
            lit("tool:self_edit:x", Tail::Nothing)
        );
        assert_eq!(literal_pattern(""), lit("", Tail::Nothing));
        assert_eq!(literal_pattern("é.*"), lit("é", DOT));
    }

    #[test]
    fn other_patterns_are_not() {
        for p in [
            "a.*b",
            "a.*.*",
            "a.{0,5}",
            "(?R)a.*",
            "a|b.*",
            "^a.*",
            "a.*$",
            r"a\b.*",
            "(?x)a b .*(?s:.*)",
            "a(b.*)?c",
            "a(.*b)?",
            "a(b.*){0,2}",
            "a(b.*)+",
            "a(b|c.*)?",
            "a[a-z].*",
            "(a|b|c|d|e|f|g|h)(a|b|c|d|e|f|g|h)(a|b|c|d|e|f|g|h).*",
        ] {
            assert_eq!(literal_pattern(p), None, "{p}");
        }
    }

    #[test]
    fn small_alternations_and_optional_tails_are_recognised() {
        let alt = |literals: &[&str], tail: Tail| {
            Some(LiteralPattern {
                literals: literals.iter().map(|s| (*s).to_owned()).collect(),
                tail,
                not_followed_by: None,
                absent: None,
            })
        };
        let opt = |text: &str| Tail::OptionalAny {
            text: text.into(),
            dotall: false,
            min: 0,
        };
        assert_eq!(
            literal_pattern("tool:(a|b):.*"),
            alt(&["tool:a:", "tool:b:"], DOT)
        );
        assert_eq!(literal_pattern("a[bc].*"), alt(&["ab", "ac"], DOT));
        assert_eq!(
            literal_pattern("x(ls|cat)( .*)?"),
            alt(&["xls", "xcat"], opt(" "))
        );
        assert_eq!(literal_pattern("x(?: .*?)?"), alt(&["x"], opt(" ")));
        assert_eq!(
            literal_pattern("(?i)ab"),
            alt(&["AB", "Ab", "aB", "ab"], Tail::Nothing)
        );
        assert_eq!(
            literal_pattern("tool:(bash|sh):git (status|log)( .*)?"),
            alt(
                &[
                    "tool:bash:git status",
                    "tool:bash:git log",
                    "tool:sh:git status",
                    "tool:sh:git log"
                ],
                opt(" ")
            )
        );
        let idx = index(&["x(ls|cat)( .*)?", "(?s).*"]);
        assert_eq!(idx.first_match("xls", false), Some(0));
        assert_eq!(idx.first_match("xcat -n a", false), Some(0));
        assert_eq!(idx.first_match("xlsa", false), Some(1));
        assert_eq!(idx.first_match("xls a\nb", false), Some(1));
        assert_eq!(idx.first_match("xca", false), Some(1));
        // The optional part's own text may be a newline; only what follows
        // it must hold none.
        let idx = index(&["a(\n.*)?", "b(\n.+)?"]);
        assert_eq!(idx.first_match("a\nxy", false), Some(0));
        assert_eq!(idx.first_match("a\nx\ny", false), None);
        assert_eq!(idx.first_match("b\n", false), None);
        assert_eq!(idx.first_match("b\né", false), Some(1));
        assert_eq!(idx.first_match("b", false), Some(1));
    }

    #[test]
    fn literal_lookahead_patterns_are_recognised() {
        let ahead = |literal: &str, not: &str, tail: Tail| {
            Some(LiteralPattern {
                literals: vec![literal.to_owned()],
                tail,
                not_followed_by: Some(not.to_owned()),
                absent: None,
            })
        };
        assert_eq!(
            lookahead_pattern("tool:git:(?!push).*"),
            ahead("tool:git:", "push", DOT)
        );
        assert_eq!(
            lookahead_pattern(r"(?s)a\.(?!b\.c).*"),
            ahead("a.", "b.c", DOTALL)
        );
        assert_eq!(lookahead_pattern("a(?!b)"), ahead("a", "b", Tail::Nothing));
        for p in [
            "(?i)a(?!b).*",
            "(?x)a(?!b c).*",
            "a(?!b|c).*",
            "a(?!b*).*",
            "a(?!{2}).*",
            "a(?!b).*(?!c)",
            "a(?!b)c.*",
            "a(?=b).*",
            r"a(?!b\)).*",
            "a(?!(b)).*",
            "(a(?!b).*)",
            "a(?!b)*",
        ] {
            assert_eq!(lookahead_pattern(p), None, "{p}");
        }
    }

    fn index(patterns: &[&str]) -> PrefixIndex {
        PrefixIndex::new(
            patterns
                .iter()
                .enumerate()
                .map(|(i, p)| (i, literal_pattern(p).unwrap()))
                .collect(),
        )
    }

    #[test]
    fn lowest_index_among_nested_literals_wins() {
        let idx = index(&["tool:a:b.*", "tool:.*", "tool:a:.*", "tool:a:bc", "(?s).*"]);
        assert_eq!(idx.first_match("tool:a:bc", false), Some(0));
        assert_eq!(idx.first_match("tool:a:x", false), Some(1));
        assert_eq!(idx.first_match("tool:a:x\ny", false), Some(4));
        assert_eq!(idx.first_match("tool:a:\nbc", false), Some(4));
        assert_eq!(idx.first_match("x", false), Some(4));
        assert!(idx.any_match("tool:a:x", false).is_some());
    }

    #[test]
    fn newline_only_matters_after_the_literal() {
        let idx = index(&["a\nb.*"]);
        assert_eq!(idx.first_match("a\nbcd", false), Some(0));
        assert_eq!(idx.first_match("a\nbc\nd", false), None);
        let idx = index(&["ab.+"]);
        assert_eq!(idx.first_match("ab", false), None);
        assert_eq!(idx.first_match("abé", false), Some(0));
    }

    #[test]
    fn many_prefixes_are_found_by_search() {
        let patterns: Vec<String> = (0..200).map(|i| format!("tool:svc{i:03}:op.*")).collect();
        let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
        let idx = index(&refs);
        assert_eq!(idx.first_match("tool:svc199:op.read x", false), Some(199));
        assert_eq!(idx.first_match("tool:svc000:op", false), Some(0));
        assert_eq!(idx.first_match("tool:svc200:op.read", false), None);
        assert_eq!(idx.first_match("tool:svc19:op.read", false), None);
        assert_eq!(idx.first_match("", false), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// The comparisons without `memcmp` agree with `starts_with`,
        /// across the eight-byte steps.
        #[test]
        fn prefix_comparisons_agree_with_starts_with(
            hay in proptest::collection::vec(proptest::sample::select(b"ab\0\xff".to_vec()), 0..20),
            needle in proptest::collection::vec(proptest::sample::select(b"ab\0\xff".to_vec()), 0..20),
        ) {
            proptest::prop_assert_eq!(starts_with(&hay, &needle), hay.starts_with(&needle));
            proptest::prop_assert_eq!(Label::new(needle.clone()).starts(&hay), hay.starts_with(&needle));
        }

        /// Saying that an input holds no newline changes no answer for
        /// inputs that hold none.
        #[test]
        fn single_line_hint_changes_nothing_on_single_lines(
            input in "[a-c: é]{0,12}",
            patterns in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a.*", "ab.+", "a(b|c)( .*)?", "(?s)b.*", "c", "a:(?!b).*", "ab:.{2,}", "(a|b|c)(a|b|c):.*",
                ]),
                1..5,
            ),
        ) {
            let idx = PrefixIndex::new(
                patterns
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (i, literal_pattern(p).or_else(|| lookahead_pattern(p)).unwrap()))
                    .collect(),
            );
            proptest::prop_assert_eq!(idx.first_match(&input, true), idx.first_match(&input, false));
            proptest::prop_assert_eq!(
                idx.any_match(&input, true).is_some(),
                idx.any_match(&input, false).is_some()
            );
        }
    }

    #[test]
    fn labels_of_every_length_are_compared_whole() {
        for len in 0..=20 {
            let label: Vec<u8> = (0..len).map(|i| b'a' + i as u8).collect();
            let l = Label::new(label.clone());
            for cut in 0..=len {
                let mut hay = label.clone();
                hay.extend_from_slice(b"xyzxyzxyz");
                assert!(l.starts(&hay), "{len}");
                assert_eq!(l.starts(&label[..cut]), cut == len, "{len} {cut}");
                if cut < len {
                    hay[cut] = b'!';
                    assert!(!l.starts(&hay), "{len} {cut}");
                }
            }
        }
    }

    #[test]
    fn possible_starts_are_sound() {
        assert_eq!(
            possible_starts("tool:(a|b):.*"),
            Some(vec!["tool:a:".to_owned(), "tool:b:".to_owned()])
        );
        let unknown = possible_starts(".*x");
        assert!(
            unknown
                .as_ref()
                .is_none_or(|s| s.iter().any(String::is_empty)),
            "{unknown:?}"
        );
    }
}
