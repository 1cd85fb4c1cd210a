//! Full-match pattern lists: literal-then-`.*` patterns by prefix lookup,
//! other plain patterns in one `RegexSet` pass, and a backtracking engine
//! (with a limit) for the few that need look-around.

mod negated;
mod prefix;

use prefix::{LiteralPattern, PrefixIndex, Tail};
use regex::{Regex, RegexSet, RegexSetBuilder};
use std::fmt;

/// How many backtracking steps a look-around pattern may take on one input
/// before matching gives up. A pattern that gives up never allows anything:
/// the decision becomes deny (see [`SetMatch::LimitExceeded`]).
pub const BACKTRACK_LIMIT: usize = 100_000;

/// A pattern that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pattern `{pattern}`: {message}")]
pub struct PatternError {
    /// The pattern as written.
    pub pattern: String,
    /// What the regex engine said about it.
    pub message: String,
}

/// The outcome of matching a string against a [`PatternSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetMatch {
    /// No pattern matches the whole string.
    None,
    /// The pattern with this index (the lowest that matches) matches the whole string.
    Matched(usize),
    /// The look-around pattern with this index ran out of backtracking
    /// steps, so whether it matches is unknown. Callers must treat this as
    /// deny, never as a match that allows.
    LimitExceeded(usize),
}

/// Which strings that start with a given text one pattern of a set is
/// certain to match (see [`PatternSet::coverage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Coverage {
    /// No single pattern matches all of them.
    Partial,
    /// Every one without a `\n` after the given text.
    WithoutNewline,
    /// Every one.
    All,
}

/// An ordered list of full-match patterns, compiled once.
///
/// Patterns that are a literal followed by `.*` (or by nothing), like
/// `tool:file:.*`, are matched as "starts with the literal, and no `\n`
/// follows" through a byte trie of literals (see `prefix`). Other patterns
/// the `regex` crate accepts are matched together in one pass by a
/// `RegexSet`, each wrapped as `\A(?:pattern)\z` so that it must match the
/// whole input (without the group, `^a|b$` would match `axxx`). Patterns that
/// need look-around or backreferences go to `fancy-regex`, with a
/// backtracking limit and a literal-prefix prefilter so that they cost
/// nothing on inputs that cannot match.
#[derive(Clone)]
pub struct PatternSet {
    patterns: Vec<String>,
    /// Literal-then-`.*` patterns.
    prefixes: PrefixIndex,
    set: Option<RegexSet>,
    /// Maps a position in `set` back to the index in `patterns`.
    set_index: Vec<usize>,
    fancy: Vec<FancyPattern>,
    /// Per pattern, what its matches are known to start with.
    shapes: Vec<Shape>,
}

/// What is known of a pattern's matches, to prove what it cannot match.
#[derive(Debug, Clone)]
struct Shape {
    /// Set if the pattern is a literal followed by `.*` or by nothing.
    literal: Option<LiteralPattern>,
    /// Every match starts with one of these; `None` if nothing is known.
    starts: Option<Vec<String>>,
    /// Matched by the backtracking engine, so it may hit the limit.
    fancy: bool,
}

#[derive(Clone)]
struct FancyPattern {
    index: usize,
    /// Every match starts with this literal text; inputs without it are skipped.
    prefix: String,
    regex: fancy_regex::Regex,
}

impl fmt::Debug for PatternSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PatternSet")
            .field("patterns", &self.patterns)
            .field(
                "fancy",
                &self.fancy.iter().map(|p| p.index).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl PatternSet {
    /// Compiles `patterns`; on failure returns the index of the first bad one.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, (usize, PatternError)> {
        let mut plain = Vec::new();
        let mut set_index = Vec::new();
        let mut literals = Vec::new();
        let mut fancy = Vec::new();
        let mut shapes = Vec::with_capacity(patterns.len());
        for (index, pattern) in patterns.iter().enumerate() {
            let pattern = pattern.as_ref();
            match classify(pattern) {
                Ok(Engine::Plain) => {
                    let literal = prefix::literal_pattern(pattern);
                    match &literal {
                        Some(lit) => literals.push((index, lit.clone())),
                        None => {
                            plain.push(wrap(pattern));
                            set_index.push(index);
                        }
                    }
                    shapes.push(Shape {
                        literal,
                        starts: prefix::possible_starts(pattern),
                        fancy: false,
                    });
                }
                Ok(Engine::Fancy) => {
                    // Matched exactly by the index, so it cannot hit the
                    // backtracking limit.
                    let indexed = prefix::lookahead_pattern(pattern)
                        .or_else(|| negated::negated_pattern(pattern));
                    if let Some(lit) = indexed {
                        shapes.push(Shape {
                            literal: None,
                            starts: Some(lit.literals.clone()),
                            fancy: false,
                        });
                        literals.push((index, lit));
                        continue;
                    }
                    let regex = fancy_regex::RegexBuilder::new(&wrap_fancy(pattern))
                        .backtrack_limit(BACKTRACK_LIMIT)
                        .build()
                        .map_err(|e| (index, invalid(pattern, e.to_string())))?;
                    let start = literal_prefix(pattern);
                    shapes.push(Shape {
                        literal: None,
                        starts: Some(vec![start.clone()]),
                        fancy: true,
                    });
                    fancy.push(FancyPattern {
                        index,
                        prefix: start,
                        regex,
                    });
                }
                Err(e) => return Err((index, e)),
            }
        }
        let set = if plain.is_empty() {
            None
        } else {
            let set = RegexSetBuilder::new(&plain).build().map_err(|e| {
                // Each pattern compiled alone, so a failure here is a size
                // limit of the combined set; blame the last pattern added.
                let index = set_index.last().copied().unwrap_or_default();
                let pattern = patterns.get(index).map(AsRef::as_ref).unwrap_or_default();
                (index, invalid(pattern, e.to_string()))
            })?;
            Some(set)
        };
        Ok(Self {
            patterns: patterns.iter().map(|p| p.as_ref().to_owned()).collect(),
            prefixes: PrefixIndex::new(literals),
            set,
            set_index,
            fancy,
            shapes,
        })
    }

    /// The patterns as written, in order.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// The pattern with this index, as written.
    pub fn pattern(&self, index: usize) -> &str {
        self.patterns.get(index).map_or("", String::as_str)
    }

    /// True if the set has no patterns.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether any pattern matches the whole of `input`, without working out
    /// which one (cheaper: the prefix index, then one `RegexSet::is_match`).
    ///
    /// If a look-around pattern runs out of backtracking steps, the result is
    /// [`SetMatch::LimitExceeded`] even when another pattern matches: an
    /// unknown answer must not be papered over.
    pub fn matches_any(&self, input: &str) -> SetMatch {
        self.matches_any_in(input, false)
    }

    /// [`PatternSet::matches_any`] for a caller that may know that `input`
    /// holds no `\n` (`single_line`), which the prefix index would
    /// otherwise look for.
    pub(crate) fn matches_any_in(&self, input: &str, single_line: bool) -> SetMatch {
        let (fancy_hit, limit) = self.fancy_scan(input);
        if let Some(limit) = limit {
            return SetMatch::LimitExceeded(limit);
        }
        if let Some(index) = fancy_hit {
            return SetMatch::Matched(index);
        }
        if let Some(index) = self.prefixes.any_match(input, single_line) {
            return SetMatch::Matched(index);
        }
        if self.set.as_ref().is_some_and(|set| set.is_match(input)) {
            // The index is only a witness here; `first_match` gives the lowest.
            return SetMatch::Matched(self.set_index.first().copied().unwrap_or_default());
        }
        SetMatch::None
    }

    /// The lowest-indexed pattern that matches the whole of `input`.
    ///
    /// Same limit rule as [`PatternSet::matches_any`].
    pub fn first_match(&self, input: &str) -> SetMatch {
        self.first_match_in(input, false)
    }

    /// [`PatternSet::first_match`], `single_line` as for
    /// [`PatternSet::matches_any_in`].
    pub(crate) fn first_match_in(&self, input: &str, single_line: bool) -> SetMatch {
        let (fancy_hit, limit) = self.fancy_scan(input);
        if let Some(limit) = limit {
            return SetMatch::LimitExceeded(limit);
        }
        let mut best = fancy_hit;
        if !self.prefixes.is_empty()
            && let Some(i) = self.prefixes.first_match(input, single_line)
        {
            best = Some(best.map_or(i, |b| b.min(i)));
        }
        // The set can only improve on `best` if it holds a lower index.
        let set_can_improve = self
            .set_index
            .first()
            .is_some_and(|&lowest| best.is_none_or(|b| lowest < b));
        if set_can_improve
            && let Some(set) = &self.set
            && set.is_match(input)
        {
            let plain_hit = set
                .matches(input)
                .iter()
                .next()
                .and_then(|first| self.set_index.get(first).copied());
            if let Some(i) = plain_hit {
                best = Some(best.map_or(i, |b| b.min(i)));
            }
        }
        best.map_or(SetMatch::None, SetMatch::Matched)
    }

    /// Whether some pattern might match a string that starts with `start`
    /// (false only when that is impossible, judged by the literal text each
    /// pattern's matches start with; look-around patterns included).
    pub(crate) fn may_match_starting_with(&self, start: &str) -> bool {
        self.shapes.iter().any(|shape| shape.may_start_with(start))
    }

    /// Whether a look-around pattern might run on a string that starts with
    /// `start`, and so might hit the backtracking limit.
    pub(crate) fn may_backtrack_starting_with(&self, start: &str) -> bool {
        self.shapes
            .iter()
            .any(|shape| shape.fancy && shape.may_start_with(start))
    }

    /// Which strings starting with `start` a single pattern of the set is
    /// certain to match, whatever follows `start` (up to a `\n`, for a
    /// pattern like `tool:bash:.*`).
    pub(crate) fn coverage(&self, start: &str) -> Coverage {
        self.shapes
            .iter()
            .filter_map(|shape| shape.literal.as_ref())
            .filter(|lit| lit.not_followed_by.is_none() && lit.absent.is_none())
            .flat_map(|lit| lit.literals.iter().map(move |literal| (literal, &lit.tail)))
            .map(|(literal, tail)| {
                let Tail::Any { dotall, min } = *tail else {
                    return Coverage::Partial;
                };
                let Some(rest) = start.strip_prefix(literal.as_str()) else {
                    return Coverage::Partial;
                };
                if rest.chars().count() < min {
                    Coverage::Partial
                } else if dotall {
                    Coverage::All
                } else if rest.contains('\n') {
                    Coverage::Partial
                } else {
                    Coverage::WithoutNewline
                }
            })
            .max()
            .unwrap_or(Coverage::Partial)
    }

    /// Runs the look-around patterns whose prefix fits `input`, all of them:
    /// returns the lowest matching index and the first pattern that hit the
    /// backtracking limit.
    fn fancy_scan(&self, input: &str) -> (Option<usize>, Option<usize>) {
        let mut hit = None;
        for p in &self.fancy {
            if !input.starts_with(p.prefix.as_str()) {
                continue;
            }
            match p.regex.is_match(input) {
                Ok(true) => hit = hit.or(Some(p.index)),
                Ok(false) => {}
                Err(_) => return (hit, Some(p.index)),
            }
        }
        (hit, None)
    }
}

impl Shape {
    fn may_start_with(&self, start: &str) -> bool {
        self.starts.as_ref().is_none_or(|starts| {
            starts
                .iter()
                .any(|s| s.starts_with(start) || start.starts_with(s.as_str()))
        })
    }
}

enum Engine {
    Plain,
    Fancy,
}

fn wrap(pattern: &str) -> String {
    format!(r"\A(?:{pattern})\z")
}

/// The same anchoring for the backtracking engine, without the group when
/// that is equivalent: fancy-regex runs a group holding look-around in its
/// slower VM as a whole, while `\Ap\z` lets it hand the plain parts to the
/// fast engine (about twice as fast). Equivalent unless the pattern has a
/// top-level `|` or a verbose-mode `#` comment could swallow the `\z`.
fn wrap_fancy(pattern: &str) -> String {
    if has_top_level_alternation(pattern) || pattern.contains('#') {
        wrap(pattern)
    } else {
        format!(r"\A{pattern}\z")
    }
}

fn invalid(pattern: &str, message: String) -> PatternError {
    PatternError {
        pattern: pattern.to_owned(),
        message,
    }
}

/// Decides which engine a pattern needs. Each pattern is compiled alone
/// first, so that a pattern cannot escape the `\A(?:…)\z` wrapper (an
/// unbalanced `)` or a verbose-mode `#` comment would otherwise change what
/// the wrapper means).
fn classify(pattern: &str) -> Result<Engine, PatternError> {
    let plain_error = match Regex::new(pattern) {
        Ok(_) => {
            // The wrapped form must compile too (it can fail where the bare
            // form does not, e.g. a trailing verbose-mode comment).
            return Regex::new(&wrap(pattern))
                .map(|_| Engine::Plain)
                .map_err(|e| invalid(pattern, e.to_string()));
        }
        Err(e) => e,
    };
    match fancy_regex::Regex::new(pattern) {
        Ok(_) => Ok(Engine::Fancy),
        Err(fancy_error) => {
            let plain = plain_error.to_string();
            // The regex crate's message is the clearer one unless the pattern
            // failed only for using features that crate lacks.
            let message = if plain.contains("look-around") || plain.contains("backreference") {
                fancy_error.to_string()
            } else {
                plain
            };
            Err(invalid(pattern, message))
        }
    }
}

/// The literal text every full match of `pattern` starts with (possibly
/// empty). Conservative: it stops at the first character that is not plainly
/// literal, and gives up entirely on a top-level alternation.
fn literal_prefix(pattern: &str) -> String {
    if has_top_level_alternation(pattern) {
        return String::new();
    }
    let mut prefix = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        let literal = if c.is_ascii_alphanumeric() || " :_-/,=@%'\"<>!&~;".contains(c) {
            c
        } else if c == '\\' {
            match chars.peek() {
                // `\<` and `\>` are word boundaries, not `<` and `>`.
                Some(&next) if next.is_ascii_punctuation() && !matches!(next, '<' | '>') => {
                    chars.next();
                    next
                }
                _ => break,
            }
        } else {
            // A quantifier makes the previous character optional.
            if matches!(c, '*' | '?' | '{') {
                prefix.pop();
            }
            return prefix;
        };
        if matches!(chars.peek(), Some('*' | '?' | '{')) {
            return prefix;
        }
        prefix.push(literal);
    }
    prefix
}

fn has_top_level_alternation(pattern: &str) -> bool {
    let mut depth = 0usize;
    let mut in_class = false;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' => in_class = true,
            ']' => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => depth = depth.saturating_sub(1),
            '|' if !in_class && depth == 0 => return true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn literal_prefix_stops_at_meta_and_drops_quantified_char() {
        assert_eq!(literal_prefix("tool:git:(?!push).*"), "tool:git:");
        assert_eq!(literal_prefix("tool:gits?:(?!x)"), "tool:git");
        assert_eq!(literal_prefix(r"tool\:a\.b(?=c)"), "tool:a.b");
        assert_eq!(literal_prefix("ab|cd(?=x)"), "");
        assert_eq!(literal_prefix("(?i)abc(?=x)"), "");
        assert_eq!(literal_prefix("ab+(?=x)"), "ab");
        assert_eq!(literal_prefix("a[|](?=x)"), "a");
        assert_eq!(literal_prefix(r"a \<b(?!c)"), "a ");
        assert_eq!(literal_prefix(r"a\>(?!c)"), "a");
    }

    #[test]
    fn word_boundary_escape_is_not_part_of_the_prefilter() {
        let set = PatternSet::new(&[r"a \<b(?!c)"]).unwrap();
        assert_eq!(set.first_match("a b"), SetMatch::Matched(0));
        assert_eq!(set.first_match("a bc"), SetMatch::None);
    }

    #[test]
    fn wrapped_patterns_match_whole_input_only() {
        let set = PatternSet::new(&["^a|b$"]).unwrap();
        assert_eq!(set.first_match("axxx"), SetMatch::None);
        assert_eq!(set.first_match("a"), SetMatch::Matched(0));
    }

    #[test]
    fn lowest_index_wins_across_engines() {
        let set = PatternSet::new(&["x.*", "a(?!b).*", "a.*"]).unwrap();
        assert_eq!(set.first_match("ac"), SetMatch::Matched(1));
        assert_eq!(set.first_match("ab"), SetMatch::Matched(2));
        assert_eq!(set.first_match("zz"), SetMatch::None);
        assert!(matches!(set.matches_any("ab"), SetMatch::Matched(_)));
        assert_eq!(set.matches_any("zz"), SetMatch::None);
    }

    #[test]
    fn verbose_comment_cannot_escape_the_wrapper() {
        assert!(PatternSet::new(&["(?x)a # comment"]).is_err());
        assert!(PatternSet::new(&["a)(?x)#"]).is_err());
        // A look-around pattern in verbose mode keeps its anchors.
        assert!(PatternSet::new(&["(?x) a (?!b) . # comment"]).is_err());
        let set = PatternSet::new(&["(?x) a (?!b) ."]).unwrap();
        assert_eq!(set.first_match("ac"), SetMatch::Matched(0));
        assert_eq!(set.first_match("acx"), SetMatch::None);
    }

    #[test]
    fn invalid_pattern_reports_its_index() {
        let (index, err) = PatternSet::new(&["ok", "(unclosed"]).unwrap_err();
        assert_eq!(index, 1);
        assert_eq!(err.pattern, "(unclosed");
    }

    #[test]
    fn catastrophic_lookaround_pattern_reports_limit() {
        let set = PatternSet::new(&[r"(?:(a|aa)+)+(?!x)b"]).unwrap();
        let input = format!("{}c", "a".repeat(40));
        assert_eq!(set.first_match(&input), SetMatch::LimitExceeded(0));
        assert_eq!(set.matches_any(&input), SetMatch::LimitExceeded(0));
    }
}
