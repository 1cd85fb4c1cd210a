//! Property: the combined matcher (one RegexSet pass plus fancy-regex for
//! look-around) answers exactly like matching each pattern on its own.

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

fn pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ATOMS), 1..5).prop_map(|parts| parts.concat())
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
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn combined_matcher_equals_naive_full_match(
        patterns in prop::collection::vec(pattern(), 0..8),
        input in "(tool:|[abx1:\n]){0,8}",
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
