//! Patterns `<A>(?!.*<B>)<T>.*`: a literal, then "`B` nowhere after it"
//! (`standard`'s file rule: a file action naming no protected path),
//! matched through the prefix index with one search for `B` instead of
//! a backtracking engine, and `B`s of the shape of protected names
//! searched without a regex engine at all.

use super::prefix::{LiteralPattern, Tail, literal_pattern};

/// A plain regex that must have no match starting at or after a point
/// `back` bytes before the end of a pattern's literal (the body of
/// `(?!.*<body>)`), compared by its text.
#[derive(Debug, Clone)]
pub(crate) struct Absent {
    source: Box<str>,
    /// How far before the literal's end the look-ahead stands.
    back: usize,
    regex: regex::Regex,
    /// The same search without the regex engine, for the shape it has.
    words: Option<DottedWords>,
}

impl PartialEq for Absent {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.back == other.back
    }
}

impl Eq for Absent {}

impl Absent {
    /// Whether the regex matches anywhere in `input` from `literal_end -
    /// back` on, seeing what comes before for `^` as the look-ahead does.
    pub(super) fn occurs(&self, input: &str, literal_end: usize) -> bool {
        let from = literal_end.saturating_sub(self.back);
        match &self.words {
            Some(words) => words.occurs(input, from),
            None => self.regex.is_match_at(input, from),
        }
    }
}

/// The characters of a "word" in [`DottedWords`]; every other character
/// stands between words.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

const BOUNDARY: &str = "[^0-9A-Za-z_-]";

/// Sorted, lowercase words of ASCII letters, digits, `_` and `-` (and
/// steps of them joined by `/`, as `usr/local/bin`), looked up
/// case-insensitively as the regex crate folds.
#[derive(Debug, Clone)]
struct WordList {
    words: Vec<Box<str>>,
    longest: usize,
    /// Whether a word holds a `/`.
    steps: bool,
}

impl WordList {
    /// The words of `a|b|…`, or `None` if one is empty or not plain.
    fn parse(list: &str) -> Option<Self> {
        let mut words: Vec<Box<str>> = Vec::new();
        for word in list.split('|') {
            let plain = word.split('/').all(|step| {
                !step.is_empty()
                    && step.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
                    })
            });
            if !plain {
                return None;
            }
            words.push(word.into());
        }
        words.sort();
        words.dedup();
        let longest = words.iter().map(|w| w.len()).max()?;
        let steps = words.iter().any(|w| w.contains('/'));
        (longest <= 64).then_some(WordList {
            words,
            longest,
            steps,
        })
    }

    /// Whether `rest` starts with one of the words, case-insensitively as
    /// the regex crate folds (`K`, the Kelvin sign, is `k`; `ſ` is `s`),
    /// followed by the end or a character that is not a word byte.
    fn name_at(&self, rest: &str) -> bool {
        let mut name = [0u8; 64];
        let mut len = 0;
        for ch in rest.chars() {
            let folded = match ch {
                '\u{212A}' => b'k',
                '\u{17F}' => b's',
                _ if ch.is_ascii() && is_word_byte(ch as u8) => (ch as u8).to_ascii_lowercase(),
                // A `/` ends a word (it is not a word byte), or joins the
                // steps of a longer one.
                '/' if self.steps && !self.is_word(name.get(..len)) => b'/',
                _ => return self.is_word(name.get(..len)),
            };
            // The two folding characters are not word bytes, so a word may
            // also end before them.
            if !ch.is_ascii() && self.is_word(name.get(..len)) {
                return true;
            }
            if len >= self.longest.min(name.len()) {
                return false;
            }
            if let Some(slot) = name.get_mut(len) {
                *slot = folded;
            }
            len += 1;
        }
        self.is_word(name.get(..len))
    }

    fn is_word(&self, name: Option<&[u8]>) -> bool {
        name.is_some_and(|name| {
            self.words
                .binary_search_by(|w| w.as_bytes().cmp(name))
                .is_ok()
        })
    }
}

/// The regex `(?:^|[^0-9A-Za-z_-])\.(?i:w1|w2|…)(?:[^0-9A-Za-z_-]|$)`
/// with words of lowercase ASCII letters, digits, `_` and `-` (`standard`'s
/// protected names), or its wider form
/// `(?:^|B)(?:\.(?i:dotted…)|/(?i:rooted…)|(?i:plain…))(?:B|$)` (with `B`
/// that class): a name standing alone after a `.`, after a `/` that itself
/// follows the start or a non-word character (`/etc`, but not `src/etc`),
/// or with nothing before it. Searched without the regex engine: for the
/// first form one `memchr` for the dots, then the name after each dot that
/// stands alone; for the wider form the same look at every place a name
/// may start. The regex engine took about 3 ns a byte for it (its literal
/// prefilter does not apply: every `.` is a candidate); this takes a
/// fraction of that. A test compares the two on random inputs.
#[derive(Debug, Clone)]
struct DottedWords {
    dotted: WordList,
    rooted: Option<WordList>,
    plain: Option<WordList>,
}

impl DottedWords {
    /// Recognises either regex's text exactly.
    fn parse(body: &str) -> Option<Self> {
        let inner = body
            .strip_prefix(&format!(r"(?:^|{BOUNDARY})"))?
            .strip_suffix(&format!(r"(?:{BOUNDARY}|$)"))?;
        if let Some(list) = inner.strip_prefix(r"\.(?i:") {
            return Some(DottedWords {
                dotted: WordList::parse(list.strip_suffix(')')?)?,
                rooted: None,
                plain: None,
            });
        }
        let rest = inner.strip_prefix(r"(?:\.(?i:")?.strip_suffix("))")?;
        let (dotted, rest) = rest.split_once(r")|/(?i:")?;
        let (rooted, plain) = rest.split_once(r")|(?i:")?;
        Some(DottedWords {
            dotted: WordList::parse(dotted)?,
            rooted: Some(WordList::parse(rooted)?),
            plain: Some(WordList::parse(plain)?),
        })
    }

    /// Whether a match starts at or after `from`.
    pub(super) fn occurs(&self, input: &str, from: usize) -> bool {
        let bytes = input.as_bytes();
        let Some(hay) = bytes.get(from..) else {
            return false;
        };
        // Whether a name's first character (its `.`, its `/`, or its first
        // letter) may stand at `at`: the character before it is part of the
        // match, so it must be at `from` or later; `^` only stands before
        // byte 0.
        let alone = |at: usize| match at.checked_sub(1) {
            None => true,
            Some(prev) => prev >= from && bytes.get(prev).is_some_and(|&b| !is_word_byte(b)),
        };
        let (Some(rooted), Some(plain)) = (&self.rooted, &self.plain) else {
            return memchr::memchr_iter(b'.', hay).any(|i| {
                let dot = from + i;
                alone(dot)
                    && input
                        .get(dot + 1..)
                        .is_some_and(|rest| self.dotted.name_at(rest))
            });
        };
        let starts = (from == 0).then_some(0).into_iter().chain(
            (from..bytes.len())
                .filter(|&i| bytes.get(i).is_some_and(|&b| !is_word_byte(b)))
                .map(|i| i + 1),
        );
        starts.into_iter().any(|at| {
            if !alone(at) {
                return false;
            }
            let Some(rest) = input.get(at..) else {
                return false;
            };
            match rest.as_bytes().first() {
                Some(b'.') => rest.get(1..).is_some_and(|r| self.dotted.name_at(r)),
                Some(b'/') => rest.get(1..).is_some_and(|r| rooted.name_at(r)),
                _ => plain.name_at(rest),
            }
        })
    }
}

/// Recognises `<A>(?!.*<B>)<T>.*` where `A` and `T` are plain literals
/// (`T` may be empty) and `B` a plain regex: like `standard`'s file rule,
/// "a file action naming no protected path". It full-matches exactly when
/// the input starts with `A` + `T`, holds no `\n` after `A` (the tail's
/// `.`, and `T`, hold none), and `B` matches nowhere from the end of `A` on
/// (the look-ahead's `.*` reaches every such position, since there is no
/// `\n` to stop it). So it is matched with a prefix test, a `\n` search
/// and one unanchored search for `B`, where the backtracking engine
/// walked the look-ahead from every position.
///
/// `B` must compile alone, so its groups and classes balance and cannot
/// end the look-ahead early, and must not be an alternation (the
/// look-ahead's `.*` binds to its first branch only); `A` may hold no flags or groups (`(?`) that
/// would change how `B` reads in place, `T` no parentheses (so the
/// look-ahead ends at the last `)`), and `B` no `#` (a verbose-mode
/// comment could swallow the `)`). A test compares both readings on
/// random patterns and inputs.
pub(super) fn negated_pattern(pattern: &str) -> Option<LiteralPattern> {
    let (a, rest) = pattern.split_once("(?!.*")?;
    let rest = rest.strip_suffix(".*")?;
    let close = rest.rfind(')')?;
    let (b, t) = (rest.get(..close)?, rest.get(close + 1..)?);
    if a.contains("(?") || b.contains('#') || b.is_empty() || t.contains(['(', ')']) {
        return None;
    }
    let exact = |p: &str| match literal_pattern(p)? {
        LiteralPattern {
            mut literals,
            tail: Tail::Nothing,
            ..
        } if literals.len() == 1 => literals.pop(),
        _ => None,
    };
    let (head, after) = (exact(a)?, exact(t)?);
    let literal = exact(&format!("{a}{t}"))?;
    if literal != format!("{head}{after}") || after.contains('\n') {
        return None;
    }
    // `(?!.*x|y)` is "neither `.*x` nor `y`", not "no `x|y` ahead": a
    // body whose top level is an alternation is left to fancy-regex.
    let ast = regex_syntax::ast::parse::Parser::new().parse(b).ok()?;
    if matches!(ast, regex_syntax::ast::Ast::Alternation(_)) {
        return None;
    }
    let regex = regex::Regex::new(b).ok()?;
    Some(LiteralPattern {
        literals: vec![literal],
        tail: Tail::Any {
            dotall: false,
            min: 0,
        },
        not_followed_by: None,
        absent: Some(Absent {
            source: b.into(),
            back: after.len(),
            regex,
            words: DottedWords::parse(b),
        }),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const DOT: Tail = Tail::Any {
        dotall: false,
        min: 0,
    };

    fn words_body(words: &[&str]) -> String {
        format!(
            r"(?:^|{BOUNDARY})\.(?i:{})(?:{BOUNDARY}|$)",
            words.join("|")
        )
    }

    #[test]
    fn negated_patterns_are_recognised() {
        let p = negated_pattern(r"tool:file(?!.*x\.y):.*").unwrap();
        assert_eq!(p.literals, ["tool:file:"]);
        assert_eq!(p.tail, DOT);
        let absent = p.absent.unwrap();
        assert_eq!((&*absent.source, absent.back), (r"x\.y", 1));
        assert!(absent.words.is_none());
        let p = negated_pattern(r"a(?!.*b).*").unwrap();
        assert_eq!(p.literals, ["a"]);
        assert_eq!(p.absent.unwrap().back, 0);
        let words = negated_pattern(&format!("a(?!.*{}).*", words_body(&["git", "ssh"])));
        assert!(words.unwrap().absent.unwrap().words.is_some());
    }

    #[test]
    fn other_negations_are_not() {
        for p in [
            "a(?!.*b)",
            "a(?!.*b)c",
            "a(?!.*)b.*",
            "(?s)a(?!.*b).*",
            "(?i)a(?!.*b).*",
            "(?x)a(?!.*b # c).*",
            "a(?!.*b)(c).*",
            "a(?!.*b).*c",
            "a(?!.*b(?=c)).*",
            r"a(?!.*b\1).*",
            "a+(?!.*b).*",
            "a(?!b).*",
            "a(?!.*b)(?s:.*)",
            // proptest: `(?!.*a|b)` is "neither `.*a` nor `b`".
            "a(?!.*b|c).*",
            "(?!.*a|b).*",
        ] {
            assert_eq!(negated_pattern(p), None, "{p}");
        }
    }

    fn wide_body(dotted: &[&str], rooted: &[&str], plain: &[&str]) -> String {
        format!(
            r"(?:^|{BOUNDARY})(?:\.(?i:{})|/(?i:{})|(?i:{}))(?:{BOUNDARY}|$)",
            dotted.join("|"),
            rooted.join("|"),
            plain.join("|")
        )
    }

    #[test]
    fn the_standard_file_rule_is_searched_without_the_regex_engine() {
        let rule = negated_pattern(&crate::presets::standard_file_rule()).unwrap();
        let words = rule.absent.unwrap().words.unwrap();
        assert!(words.rooted.is_some() && words.plain.is_some());
    }

    #[test]
    fn the_wide_shape_is_recognised_and_others_are_not() {
        let wide = DottedWords::parse(&wide_body(&["git"], &["etc"], &["cron"])).unwrap();
        assert!(wide.rooted.is_some() && wide.plain.is_some());
        for body in [
            wide_body(&["git"], &["etc"], &[""]),
            wide_body(&["git"], &["Etc"], &["cron"]),
            wide_body(&["g.t"], &["etc"], &["cron"]),
            wide_body(&["git"], &["usr//bin"], &["cron"]),
            wide_body(&["git"], &["/bin"], &["cron"]),
            wide_body(&["git"], &["bin/"], &["cron"]),
            format!(r"(?:^|{BOUNDARY})(?:\.(?i:git)|/(?i:etc))(?:{BOUNDARY}|$)"),
            format!(r"(?:^|{BOUNDARY})(?:\.(?i:git)|(?i:etc)|/(?i:cron))(?:{BOUNDARY}|$)"),
        ] {
            assert!(DottedWords::parse(&body).is_none(), "{body}");
        }
    }

    #[test]
    fn dotted_words_need_the_exact_shape() {
        assert!(DottedWords::parse(&words_body(&["git", "a-b_9"])).is_some());
        for body in [
            words_body(&["Git"]),
            words_body(&["g.t"]),
            words_body(&[""]),
            words_body(&["g", ""]),
            words_body(&["é"]),
            format!(r"(?:^|[^0-9A-Za-z_])\.(?i:git)(?:{BOUNDARY}|$)"),
            format!(r"(?:^|{BOUNDARY})\.(?i:git)(?:{BOUNDARY})"),
            format!(r"(?:^|{BOUNDARY})\.(?:git)(?:{BOUNDARY}|$)"),
        ] {
            assert!(DottedWords::parse(&body).is_none(), "{body}");
        }
    }

    #[test]
    fn dotted_words_match_their_regex_on_tricky_inputs() {
        let words = ["git", "kube", "ssh", "gitlab-ci", "my", "m2"];
        let body = words_body(&words);
        let fast = DottedWords::parse(&body).unwrap();
        let regex = regex::Regex::new(&body).unwrap();
        for input in [
            "tool:file:.git",
            "tool:file:write .git/config",
            "tool:file:write a.git/config",
            "tool:file:write ..git",
            "tool:file:write -.git",
            "tool:file:write _.git",
            "tool:file:write \u{e9}.git",
            "tool:file:write .GIT",
            "tool:file:write .\u{212A}ube",
            "tool:file:write .\u{17F}sh",
            "tool:file:write .git\u{212A}",
            "tool:file:write .gitlab-ci.yml",
            "tool:file:write .gitlab",
            "tool:file:write .git-x",
            "tool:file:write .my.cnf",
            "tool:file:write .M2/x",
            "tool:file:write .g\u{e9}t",
            ".git",
            "x.git",
            "",
            ".",
        ] {
            for from in (0..=input.len()).filter(|&i| input.is_char_boundary(i)) {
                assert_eq!(
                    fast.occurs(input, from),
                    regex.is_match_at(input, from),
                    "{input:?} from {from}"
                );
            }
        }
    }

    #[test]
    fn wide_words_match_their_regex_on_tricky_inputs() {
        let body = wide_body(
            &["git", "bashrc"],
            &[
                "etc",
                "bin",
                "usr/bin",
                "usr/local/bin",
                "opt/homebrew/s-bin",
            ],
            &["cron", "site-packages", "kube"],
        );
        let fast = DottedWords::parse(&body).unwrap();
        let regex = regex::Regex::new(&body).unwrap();
        for input in [
            "tool:file:write /etc/profile",
            "tool:file:/etc",
            "tool:file:write src/etc/x",
            "tool:file:write /usr/../etc/x",
            "tool:file:write //etc/x",
            "tool:file:write /etcetera",
            "tool:file:write /var/spool/cron/root",
            "tool:file:write src/cron.rs",
            "tool:file:write src/mycron.rs",
            "tool:file:write .cron",
            "tool:file:write lib/site-packages/x.pth",
            "tool:file:write \u{212A}ube",
            "tool:file:write /\u{212A}ube",
            "tool:file:write \u{e9}cron",
            "tool:file:write ~/.bashrc",
            "tool:file:write a.bashrc",
            "tool:file:write /usr/local/bin/git",
            "tool:file:write /usr/local/binx",
            "tool:file:write /usr/local/lib/x",
            "tool:file:write /usr/local",
            "tool:file:write /usr/local/",
            "tool:file:write /USR/Local/BIN",
            "tool:file:write /usr/lo\u{17F}al/bin",
            "tool:file:write /usr/bin",
            "tool:file:write /usr/binary",
            "tool:file:write src/bin/main.rs",
            "tool:file:write ~/bin/x",
            "tool:file:write /opt/homebrew/s-bin/x",
            "tool:file:write /opt/homebrew/s-bi",
            "tool:file:write /usr//bin/x",
            "cron",
            "/etc",
            "etc",
            "",
            "/",
        ] {
            for from in (0..=input.len()).filter(|&i| input.is_char_boundary(i)) {
                assert_eq!(
                    fast.occurs(input, from),
                    regex.is_match_at(input, from),
                    "{input:?} from {from}"
                );
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        #[test]
        fn wide_words_match_their_regex(
            dotted in proptest::collection::vec("[a-z0-9_-]{1,4}", 1..4),
            rooted in proptest::collection::vec("[a-z0-9_-]{1,4}(/[a-z0-9_-]{1,3}){0,2}", 1..3),
            plain in proptest::collection::vec("[a-z0-9_-]{1,4}", 1..4),
            input in "(\\.|/|[gitkKsSh_/: -]|\u{212A}|\u{17F}|\u{e9}|\u{130}|\u{131}){0,16}",
        ) {
            fn words(w: &[String]) -> Vec<&str> {
                w.iter().map(String::as_str).collect()
            }
            let body = wide_body(&words(&dotted), &words(&rooted), &words(&plain));
            let fast = DottedWords::parse(&body).unwrap();
            let regex = regex::Regex::new(&body).unwrap();
            for from in (0..=input.len()).filter(|&i| input.is_char_boundary(i)) {
                proptest::prop_assert_eq!(
                    fast.occurs(&input, from),
                    regex.is_match_at(&input, from),
                    "{:?} {:?} {:?} in {:?} from {}", dotted, rooted, plain, input, from
                );
            }
        }

        #[test]
        fn dotted_words_match_their_regex(
            words in proptest::collection::vec("[a-z0-9_-]{1,4}", 1..6),
            input in "(\\.|[gitkKsSh_/: -]|\u{212A}|\u{17F}|\u{e9}|\u{130}|\u{131}){0,16}",
        ) {
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let body = words_body(&words);
            let fast = DottedWords::parse(&body).unwrap();
            let regex = regex::Regex::new(&body).unwrap();
            for from in (0..=input.len()).filter(|&i| input.is_char_boundary(i)) {
                proptest::prop_assert_eq!(
                    fast.occurs(&input, from),
                    regex.is_match_at(&input, from),
                    "{:?} in {:?} from {}", words, input, from
                );
            }
        }
    }
}
