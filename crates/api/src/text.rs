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

/// A letter of `text` that could pass for another script's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookalike {
    /// Byte offset of the letter in `text`.
    pub at: usize,
    /// The letter's script ("Cyrillic").
    pub script: &'static str,
    /// The script it is among ("Latin"), or, for a letter of a word
    /// wholly in its own script (`whole`), the script it passes for.
    pub among: &'static str,
    /// Its word is wholly in its script, every letter drawn like a Latin
    /// one, in a text that holds Latin letters (`ѕѕһ` among Latin words).
    pub whole: bool,
}

/// Whether `c`, not ASCII, is drawn like Latin letters or digits: its
/// skeleton (Unicode's confusables, UTS #39) is ASCII letters and digits
/// only, as `ѕ` (U+0455) is `s`.
pub fn reads_as_latin(c: char) -> bool {
    if c.is_ascii() {
        return false;
    }
    let mut buf = [0u8; 4];
    let mut skeleton = unicode_security::skeleton(c.encode_utf8(&mut buf)).peekable();
    skeleton.peek().is_some() && skeleton.all(|k| k.is_ascii_alphanumeric())
}

/// Every letter of a [`LOOK_ALIKE`] script that [`reads_as_latin`], in
/// code point order: the web page keeps the same set (a test compares).
pub fn latin_lookalike_letters() -> impl Iterator<Item = char> {
    ('\u{80}'..=char::MAX)
        .filter(|&c| script_of(c).is_some_and(|s| LOOK_ALIKE.contains(&s)) && reads_as_latin(c))
}

/// Letters that could pass for others: in each word of `text` (what lies
/// between white space, so `https://pаypal.com` is one) that holds letters
/// of more than one script, those of a [`LOOK_ALIKE`] script other than
/// the word's Latin (or, without Latin, its most common) one; and, when
/// `text` holds Latin letters, every letter of a word wholly in one
/// [`LOOK_ALIKE`] script whose letters all [`reads_as_latin`] (a program
/// named `ѕѕһ` reads as `ssh`), in order. Other words wholly in one script
/// (Russian text, or a Russian word among Latin ones) yield none. The web
/// page's `lookalikes()` follows the same rule.
pub fn lookalikes(text: &str) -> Vec<Lookalike> {
    let mut out = Vec::new();
    if text.is_ascii() {
        return out;
    }
    let latin = text.chars().any(|c| script_of(c) == Some(Script::Latin));
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
            let passes = latin
                && LOOK_ALIKE.contains(&first)
                && word
                    .chars()
                    .all(|c| script_of(c).is_none() || reads_as_latin(c));
            if passes {
                out.extend(letters.iter().map(|&(at, s)| Lookalike {
                    at,
                    script: s.full_name(),
                    among: Script::Latin.full_name(),
                    whole: true,
                }));
            }
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
                    whole: false,
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

    /// A word wholly in a look-alike script, every letter drawn like a
    /// Latin one, among Latin words: the program `ѕѕһ` (Cyrillic dze, dze,
    /// shha) an agent put on the PATH reads as `ssh`.
    #[test]
    fn a_word_wholly_of_letters_drawn_like_latin_ones_among_latin_words_is_found() {
        let text = "\u{455}\u{455}\u{4bb} root@db.internal";
        let l = lookalikes(text);
        assert_eq!(l.len(), 3);
        assert!(
            l.iter()
                .all(|l| l.whole && l.script == "Cyrillic" && l.among == "Latin")
        );
        assert_eq!(l[2].at, 4);
        // Greek, and digits or punctuation in the word.
        assert_eq!(found("cat \u{39f}\u{39a}.txt").len(), 2);
        assert_eq!(found("rm -rf /tmp/x \u{441}\u{43e}\u{440}").len(), 3);
        // Not every letter drawn like a Latin one: a Russian word.
        assert_eq!(found("git commit -m \u{444}\u{438}\u{43a}\u{441}"), []);
        assert!(reads_as_latin('\u{455}') && reads_as_latin('\u{430}'));
        assert!(!reads_as_latin('\u{444}') && !reads_as_latin('s'));
    }

    #[test]
    fn words_in_one_script_are_plain() {
        for plain in [
            "ls -la ~/src | grep é",
            "удалить файл /tmp/x",
            // With no Latin letter in the text: Russian read as Russian.
            "\u{441}\u{43e}\u{440} \u{443}\u{445}\u{43e}",
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
