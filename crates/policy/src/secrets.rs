//! Secrets inside command text, masked for display: common token shapes
//! (`sk_live_…`, `ghp_…`, `xoxb-…`, `AKIA…`, JWTs), `-u user:pass`,
//! `Authorization:` headers, `Bearer …`, `password=…` (and other
//! credential-named keys), `--password …`, `scheme://user:pass@host` and
//! the body of a PEM private key written on one line.
//!
//! The same rules live in the web page (`crates/server/web/secrets.js`);
//! both are checked against one table of cases,
//! `crates/policy/tests/secret_shapes.json`. Masking is for display only:
//! what runs is the raw text, which an operator can still reveal on the
//! page. A token's well-known prefix stays visible (`sk_live_••••`), so the
//! reader still sees what kind of secret it was.
//!
//! What a shell would not take literally is never masked: a value holding
//! a substitution, an expansion, a pipe, a redirection, a glob or an
//! escape (one of [`ACTIVE`]) is shown whole, so a mask can never hide
//! what would run (`-u admin:$(curl …|sh)`) or how far a scope reaches
//! (`deploy:*`); nor a URL's "password" holding `#` or `?`
//! (`http://203.0.113.7:8443#@github.com/…` goes to 203.0.113.7, and the
//! host it shows must stay); nor a path after a free-standing `bearer`
//! (one after `-`, `:`, `=` or a quote is a token). Nor is a value starting with `@`: `curl -F token=@file`
//! uploads that file, so the value names what runs. Nor does a mask ever
//! cover a line break: a shell runs each line, so a mask over one could
//! hide a command (`# -----BEGIN PRIVATE KEY-----` and the lines after
//! it). A private key written over several lines is so shown whole; a
//! chat card shows it nowhere, and approves nothing from chat
//! ([`private_key_over_lines`]).

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

/// What a masked secret is shown as (the page's `MASK`).
pub const MASK: &str = "••••";

/// Each rule's one capture group is the secret; the rest only places it.
const RULES: &[&str] = &[
    r"\b(?:sk|rk)_(?:live|test)_([A-Za-z0-9]{8,})",
    r"\bgh[pousr]_([A-Za-z0-9]{20,})",
    r"\bgithub_pat_([A-Za-z0-9_]{20,})",
    r"\bxox[abposr]-([A-Za-z0-9-]{10,})",
    r"\b(?:AKIA|ASIA)([0-9A-Z]{16})\b",
    r"\bglpat-([A-Za-z0-9_-]{20,})",
    r"\bsk-([A-Za-z0-9_-]{20,})",
    r"\bAIza([0-9A-Za-z_-]{35})",
    r"\bnpm_([A-Za-z0-9]{36})",
    r"\beyJ([A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    r"(?:^|\s)(?:-u|--user)(?:\s+|=)?['\x22]?[^\s:'\x22]+:([^\s'\x22]+)",
    r"://[^\s:/@'\x22]+:([^\s@/'\x22#?]+)@",
    r"(?i)\bauthorization:\s*(?:(?:bearer|basic|token|bot|digest)\s+)?([^\s'\x22]+)",
    r"(?i)(?:-|[:'\x22=]\s*)bearer\s+([A-Za-z0-9._~+/=-]{8,})",
    r"(?i)\b(?:x-)?api-key:\s*([^\s'\x22]+)",
    r"(?i)\b[A-Za-z0-9_.-]*?(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)[A-Za-z0-9_.-]*\s*=\s*['\x22]?([^\s'\x22&;]+)",
    r"(?i)--(?:password|passwd|token|secret|api-key|access-key)\s+([^\s'\x22-][^\s'\x22]*)",
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----([^\n\r\v\f\x{85}\x{2028}\x{2029}]+?)(?:-----END|$)",
];

/// What starts a new line to a terminal, a page or a chat: a mask never
/// covers one.
pub const LINE_BREAKS: &[char] = &[
    '\n', '\r', '\u{b}', '\u{c}', '\u{85}', '\u{2028}', '\u{2029}',
];

/// The start of a PEM private key (`-----BEGIN OPENSSH PRIVATE KEY-----`).
static PRIVATE_KEY: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----").ok());

/// Whether `text` holds the start of a private key with a line break
/// after it: a key written over several lines, which masking leaves whole
/// (a mask never covers a line break). Fails closed: true when the pattern
/// could not be built.
pub fn private_key_over_lines(text: &str) -> bool {
    match PRIVATE_KEY.as_ref() {
        Some(re) => re.find_iter(text).any(|m| {
            let rest = &text[m.end()..];
            // Over lines unless it ends on the line it starts.
            rest.find(LINE_BREAKS)
                .is_some_and(|nl| !rest[..nl].contains("-----END"))
        }),
        None => true,
    }
}

/// The characters that make a value more than a literal to a shell (or a
/// pattern to a grant's scope): a value holding one is never masked.
pub const ACTIVE: &[char] = &[
    '$', '`', '(', ')', '|', ';', '&', '<', '>', '*', '?', '[', ']', '{', '}', '\\',
];

static COMPILED: LazyLock<Vec<Regex>> =
    LazyLock::new(|| RULES.iter().filter_map(|r| Regex::new(r).ok()).collect());

/// All the rules in one pass: which of them match at all (most text
/// matches none, and is then read once instead of once per rule).
static ANY: LazyLock<Option<regex::RegexSet>> = LazyLock::new(|| {
    let compiled: Vec<&str> = COMPILED.iter().map(Regex::as_str).collect();
    regex::RegexSet::new(compiled).ok()
});

/// The byte ranges of `text` that look like secrets, sorted and merged.
pub fn secret_ranges(text: &str) -> Vec<Range<usize>> {
    let mut found: Vec<Range<usize>> = Vec::new();
    // Without the set (it failed to build), every rule is run.
    let hits = ANY.as_ref().map(|set| set.matches(text));
    for (i, re) in COMPILED.iter().enumerate() {
        if hits.as_ref().is_some_and(|h| !h.matched(i)) {
            continue;
        }
        for caps in re.captures_iter(text) {
            if let (Some(whole), Some(m)) = (caps.get(0), caps.get(1))
                && !m.is_empty()
                && maskable(text, whole.range(), m.range())
            {
                found.push(m.range());
            }
        }
    }
    found.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in found {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// Whether the secret `m` found by a rule's match `whole` in `text` may be
/// masked: only where a mask cannot hide what runs or where it goes.
fn maskable(text: &str, whole: Range<usize>, m: Range<usize>) -> bool {
    let (secret, matched) = (&text[m.clone()], &text[whole.clone()]);
    let before = text[..whole.start].chars().next_back();
    let after = text[m.end..].chars().next();
    // A value holding what a shell does not take literally.
    !secret.contains(ACTIVE)
        // A shell runs each line: a mask over a line break, or one placed
        // by text on the line before, could hide a command.
        && !matched.trim_start_matches(LINE_BREAKS).contains(LINE_BREAKS)
        // `-F token=@file` uploads the file: it names what runs.
        && !secret.starts_with('@')
        // A path (`--password-file=/etc/shadow` sends that file).
        && !["/", "~/", "./", "../"].iter().any(|p| secret.starts_with(p))
        // A host or a path segment (`https://eyJ….example/`,
        // `rm -rf data/xoxb-records`), unless it is a URL's credentials.
        && (!matches!(before, Some('/' | '.')) || after == Some('@'))
        // A variable the line then expands (`API_KEY=rm; $API_KEY -rf x`).
        && !assigned_and_used(text, matched)
}

/// Whether `matched` assigns a variable (`NAME=…`) that `text` expands.
fn assigned_and_used(text: &str, matched: &str) -> bool {
    let Some((left, _)) = matched.split_once('=') else {
        return false;
    };
    let name: String = left
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    !name.is_empty() && (text.contains(&format!("${name}")) || text.contains(&format!("${{{name}")))
}

/// `text` with every secret-looking part replaced by [`MASK`].
pub fn mask_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in secret_ranges(text) {
        out.push_str(&text[at..r.start]);
        out.push_str(MASK);
        at = r.end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_compiles() {
        assert_eq!(COMPILED.len(), RULES.len());
        assert!(PRIVATE_KEY.is_some());
    }

    #[test]
    fn a_private_key_over_lines_is_told() {
        assert!(private_key_over_lines(
            "# -----BEGIN PRIVATE KEY-----\ntouch x"
        ));
        assert!(private_key_over_lines(
            "a -----BEGIN EC PRIVATE KEY-----MIIE\u{2028}b"
        ));
        assert!(!private_key_over_lines(
            "k=-----BEGIN PRIVATE KEY-----MIIEab-----END PRIVATE KEY-----"
        ));
        assert!(!private_key_over_lines(
            "ls\n-----BEGIN PUBLIC KEY-----\nMII"
        ));
        assert!(!private_key_over_lines(
            "k='-----BEGIN PRIVATE KEY-----MIIE-----END PRIVATE KEY-----'\nls"
        ));
    }

    /// The table the page's copy of these rules is tested against too.
    #[test]
    fn masks_the_shared_table_of_shapes() {
        let cases: Vec<(String, String)> =
            serde_json::from_str(include_str!("../tests/secret_shapes.json")).unwrap_or_default();
        assert!(cases.len() > 20);
        for (input, want) in cases {
            assert_eq!(mask_secrets(&input), want, "{input}");
        }
    }
}
