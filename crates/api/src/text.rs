//! Text an agent sends that a human reads: which characters would hide
//! or reorder what is shown around them, which letters could pass for
//! another script's, and how a long one is cut.

use unicode_script::{Script, UnicodeScript};

/// `s` cut to at most `max` characters, then `…`.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// Whether `c` would be invisible, reorder the text around it, or move the
/// cursor: controls (C0, DEL, C1), format characters (Unicode's `Cf`:
/// bidi marks, overrides and isolates, zero-width joiners and spaces, the
/// BOM, soft hyphen, tags), line and paragraph separators, and the
/// interlinear annotation, fillers and the blank Braille pattern that
/// render as nothing.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x00AD                      // soft hyphen
            | 0x034F                    // combining grapheme joiner
            | 0x0600..=0x0605           // Arabic number signs
            | 0x061C                    // Arabic letter mark
            | 0x06DD | 0x070F | 0x08E2
            | 0x115F | 0x1160           // Hangul fillers
            | 0x17B4 | 0x17B5
            | 0x180B..=0x180F           // Mongolian selectors, vowel separator
            | 0x200B..=0x200F           // zero-width space/joiners, LRM, RLM
            | 0x2028 | 0x2029           // line, paragraph separators
            | 0x202A..=0x202E           // bidi embeddings and overrides
            | 0x2060..=0x206F           // word joiner, invisible operators, isolates
            | 0x2800                    // Braille pattern blank
            | 0x3164                    // Hangul filler
            | 0xFE00..=0xFE0F           // variation selectors
            | 0xFEFF                    // BOM, zero-width no-break space
            | 0xFFA0
            | 0xFFF0..=0xFFF8           // unassigned specials, drawn as nothing
            | 0xFFF9..=0xFFFB           // interlinear annotation
            | 0x110BD | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF         // tags, variation selectors supplement
        )
}

/// The script a letter counts as when telling scripts apart in a word:
/// none for what is not a letter or belongs to every script (digits,
/// punctuation, combining marks); Japanese and Korean write Han with
/// their own scripts, so those count as Han.
fn script_of(c: char) -> Option<Script> {
    if !c.is_alphabetic() {
        return None;
    }
    match c.script() {
        Script::Common | Script::Inherited | Script::Unknown => None,
        Script::Hiragana | Script::Katakana | Script::Hangul | Script::Bopomofo => {
            Some(Script::Han)
        }
        s => Some(s),
    }
}

/// Scripts with letters drawn like Latin ones (Unicode's confusables list
/// pairs most of their letters with Latin or with each other): only their
/// letters are marked. A Japanese file name with `.txt`, or Hebrew next
/// to a Latin flag, mixes scripts no one would take for each other.
const LOOK_ALIKE: [Script; 13] = [
    Script::Cyrillic,
    Script::Greek,
    Script::Armenian,
    Script::Cherokee,
    Script::Coptic,
    Script::Lisu,
    Script::Canadian_Aboriginal,
    Script::Tifinagh,
    Script::Old_Italic,
    Script::Runic,
    Script::Gothic,
    Script::Deseret,
    Script::Osage,
];

/// A letter of another script in a word of `text` that mixes scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookalike {
    /// Byte offset of the letter in `text`.
    pub at: usize,
    /// The letter's script ("Cyrillic").
    pub script: &'static str,
    /// The script it is among ("Latin").
    pub among: &'static str,
}

/// Letters that could pass for others: in each word of `text` (what lies
/// between white space, so `https://pаypal.com` is one) that holds letters
/// of more than one script, those of a [`LOOK_ALIKE`] script other than
/// the word's Latin (or, without Latin, its most common) one, in order. A
/// word wholly in one script yields none. The web page's `lookalikes()`
/// follows the same rule.
pub fn lookalikes(text: &str) -> Vec<Lookalike> {
    let mut out = Vec::new();
    if text.is_ascii() {
        return out;
    }
    for word in text.split(char::is_whitespace) {
        // Where the word begins in `text` (it is a slice of it).
        let at = word.as_ptr().addr() - text.as_ptr().addr();
        let letters: Vec<(usize, Script)> = word
            .char_indices()
            .filter_map(|(i, c)| script_of(c).map(|s| (at + i, s)))
            .collect();
        let Some(&(_, first)) = letters.first() else {
            continue;
        };
        if letters.iter().all(|&(_, s)| s == first) {
            continue;
        }
        let keep = if letters.iter().any(|&(_, s)| s == Script::Latin) {
            Script::Latin
        } else {
            most_common(&letters)
        };
        out.extend(
            letters
                .iter()
                .filter(|&&(_, s)| s != keep && LOOK_ALIKE.contains(&s))
                .map(|&(at, s)| Lookalike {
                    at,
                    script: s.full_name(),
                    among: keep.full_name(),
                }),
        );
    }
    out
}

/// The script most of `letters` are in (the first seen of a tie).
fn most_common(letters: &[(usize, Script)]) -> Script {
    let mut counts: Vec<(Script, usize)> = Vec::new();
    for &(_, s) in letters {
        match counts.iter_mut().find(|(t, _)| *t == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((s, 1)),
        }
    }
    let best = counts.iter().map(|&(_, n)| n).max().unwrap_or(0);
    counts
        .iter()
        .find(|&&(_, n)| n == best)
        .map_or(Script::Latin, |&(s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(char, &'static str, &'static str)> {
        lookalikes(text)
            .into_iter()
            .map(|l| {
                (
                    text[l.at..].chars().next().unwrap_or_default(),
                    l.script,
                    l.among,
                )
            })
            .collect()
    }

    #[test]
    fn a_letter_of_another_script_in_a_latin_word_is_found() {
        assert_eq!(
            found("curl https://p\u{430}ypal.com/login"),
            [('\u{430}', "Cyrillic", "Latin")]
        );
        assert_eq!(
            found("rm -rf /srv/l\u{3bf}gs"),
            [('\u{3bf}', "Greek", "Latin")]
        );
        assert_eq!(
            found("git push --f\u{13a5}rce"),
            [('\u{13a5}', "Cherokee", "Latin")]
        );
        // A host all in Cyrillic look-alikes is one word with the scheme.
        let host = found("curl https://\u{440}\u{430}\u{443}\u{440}\u{430}\u{4cf}.com");
        assert_eq!(host.len(), 6);
        assert!(host.iter().all(|&(_, s, _)| s == "Cyrillic"));
        // Without Latin, the most common script is kept.
        assert_eq!(
            found("\u{444}\u{430}\u{439}\u{3bb}"),
            [('\u{3bb}', "Greek", "Cyrillic")]
        );
    }

    #[test]
    fn words_in_one_script_are_plain() {
        for plain in [
            "ls -la ~/src | grep é",
            "удалить файл /tmp/x",
            "echo 日本語のテキスト 한국어",
            // Scripts no one takes for Latin, mixed with it.
            "cat レポート.txt",
            "mv a\u{5d0} x",
            "naïve café x2\tnext\nline",
            "a\u{301}b 123 ½",
            "",
            "   ",
        ] {
            assert_eq!(found(plain), [], "{plain}");
        }
    }

    #[test]
    fn offsets_are_bytes_across_multibyte_spaces() {
        // An ideographic space (3 bytes) and an emoji before the word.
        let text = "\u{1f600}\u{3000}p\u{430}y";
        let l = lookalikes(text);
        assert_eq!(l.len(), 1);
        assert_eq!(&text[l[0].at..l[0].at + 2], "\u{430}");
    }
}
