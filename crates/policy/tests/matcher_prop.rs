//! Property: the combined matcher (a prefix index for literal-then-`.*`
//! patterns, small alternations of literals, optional `( .*)?` tails and
//! literal look-aheads, `<literal>(?!.*<regex>)<literal>.*` negations,
//! one RegexSet pass, fancy-regex for other look-around) answers exactly
//! like matching each pattern on its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use actiongate_policy::{PatternSet, SetMatch};
use proptest::prelude::*;

/// Pieces of patterns, some needing look-around or backreferences.
const ATOMS: &[&str] = &[
    "a",
    "b",
    "tool:",
    ":",
    ".",
    ".*",
    "a*",
    "b+",
    "[ab]",
    "[^a]",
    "(a|b)",
    "(ab)?",
    r"\d",
    "x",
    "^",
    "$",
    "(?!a)",
    "(?=b)",
    "(?<=a)",
    "(?<!b)",
    r"(a)\1",
    "(?i)A",
    "a|b",
    "(?:tool:a|b)",
];

fn atoms() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ATOMS), 1..5).prop_map(|parts| parts.concat())
}

/// What may follow a literal; most of these keep the pattern in the prefix
/// index, the last few push it back to the `RegexSet`.
const TAILS: &[&str] = &[
    ".*",
    ".*?",
    ".+",
    "",
    "(?s:.*)",
    ".{2,}",
    ".*$",
    ".{0,3}",
    "[^:]*",
    "( .*)?",
    "(a.+)?",
    "(?:\n.*?)?",
    "(?s:(b.*)?)",
    "( .*)+",
    "(a|b.*)?",
    "(a.*){0,2}",
];

/// Small alternations inside the literal, expanded by the prefix index
/// (the last one is too large and stays with the `RegexSet`).
const GROUPS: &[&str] = &[
    "",
    "(a|b)",
    "(tool:|a )",
    "[ab]",
    "(é|x:|)",
    "(?:a|b)(a|:)",
    "(a|b|c|d|e|f|g|h)(a|b|c|d|e|f|g|h)(a|b|c|d|e|f|g|h)",
];

/// Flags in front of the pattern.
const FLAGS: &[&str] = &["", "", "(?s)", "(?i)", "(?-s)", "(?m)"];

/// `<flags><literal>[(?!<literal>)]<tail>`, sometimes in a group: the
/// shape of `tool:file:.*`, `(?s).*` and `tool:git:(?!push).*`, with
/// literals (escaped, possibly holding a newline or a multi-byte character)
/// that often start one another.
fn literal_pattern() -> impl Strategy<Value = String> {
    (
        prop::sample::select(FLAGS),
        "(tool:|[ab:.\n]|é){0,4}",
        prop::sample::select(GROUPS),
        prop::option::of("(tool:|[ab:.]|é){0,2}"),
        prop::sample::select(TAILS),
        any::<bool>(),
    )
        .prop_map(|(flags, literal, alternation, ahead, tail, group)| {
            let ahead = ahead.map_or(String::new(), |a| {
                format!("(?!{})", regex_syntax::escape(&a))
            });
            let body = format!(
                "{}{alternation}{ahead}{tail}",
                regex_syntax::escape(&literal)
            );
            if group {
                format!("{flags}({body})")
            } else {
                format!("{flags}{body}")
            }
        })
}

/// `<literal>(?!.*<body>)<literal>.*`, the shape of `standard`'s file
/// rule, with plain bodies and (as that rule has) dotted-word bodies, in
/// their narrow and wide forms.
fn negated_pattern() -> impl Strategy<Value = String> {
    let words = prop::collection::vec("[a-z:_-]{1,3}", 1..4).prop_map(|w| {
        format!(
            r"(?:^|[^0-9A-Za-z_-])\.(?i:{})(?:[^0-9A-Za-z_-]|$)",
            w.join("|")
        )
    });
    let list = || prop::collection::vec("[a-z:_-]{1,3}", 1..3).prop_map(|w| w.join("|"));
    let wide = (list(), list(), list()).prop_map(|(dotted, rooted, plain)| {
        format!(
            r"(?:^|[^0-9A-Za-z_-])(?:\.(?i:{dotted})|/(?i:{rooted})|(?i:{plain}))(?:[^0-9A-Za-z_-]|$)"
        )
    });
    (
        "(tool|[ab:./]|é){0,3}",
        prop_oneof![atoms(), words, wide],
        "(:|[ab.]){0,2}",
        any::<bool>(),
    )
        .prop_map(|(head, body, after, group)| {
            let (head, after) = (regex_syntax::escape(&head), regex_syntax::escape(&after));
            if group {
                format!("({head}(?!.*{body}){after}.*)")
            } else {
                format!("{head}(?!.*{body}){after}.*")
            }
        })
}

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![atoms(), literal_pattern(), negated_pattern()]
}

fn naive_first_match(patterns: &[String], input: &str) -> Option<usize> {
    patterns.iter().position(|p| {
        fancy_regex::Regex::new(&format!(r"\A(?:{p})\z"))
            .unwrap()
            .is_match(input)
            .unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn combined_matcher_equals_naive_full_match(
        patterns in prop::collection::vec(pattern(), 0..12),
        input in "(tool:|[abx1:./ \n_-]|é|\u{212A}|\u{17F}|[kKsS]){0,8}",
    ) {
        let set = PatternSet::new(&patterns).unwrap();
        let expected = naive_first_match(&patterns, &input);
        let got = match set.first_match(&input) {
            SetMatch::Matched(i) => Some(i),
            SetMatch::None => None,
            SetMatch::LimitExceeded(i) => panic!("limit on tiny input, pattern {i}"),
        };
        prop_assert_eq!(got, expected, "patterns {:?} input {:?}", patterns, input);
        let any = !matches!(set.matches_any(&input), SetMatch::None);
        prop_assert_eq!(any, expected.is_some());
    }
}
