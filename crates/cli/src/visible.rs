//! What the operator sees is what runs: text that came from agents (action
//! strings, params, reasons) with every character a terminal would hide or
//! reorder made visible. A line feed is `⏎` (and, in multi-line output, a
//! real line break after it), a carriage return `␍`, a tab `⇥`; other C0
//! and C1 controls, bidirectional overrides and isolates, zero-width and
//! other invisible format characters, and line or paragraph separators
//! are `⟨U+XXXX⟩`. The same rule as the web page's `visible()`.

/// How one character is shown, or `None` when it is shown as itself.
fn shown(c: char) -> Option<String> {
    match c {
        '\n' => Some("⏎".to_owned()),
        '\r' => Some("␍".to_owned()),
        '\t' => Some("⇥".to_owned()),
        c if is_hidden(c) => Some(format!("⟨U+{:04X}⟩", c as u32)),
        _ => None,
    }
}

/// Whether `c` would be invisible, reorder the text around it, or move the
/// cursor: controls (C0, DEL, C1), format characters (Unicode's `Cf`:
/// bidi marks, overrides and isolates, zero-width joiners and spaces, the
/// BOM, soft hyphen, tags), line and paragraph separators, and the
/// interlinear annotation and variation-free fillers that render as
/// nothing.
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
            | 0x3164                    // Hangul filler
            | 0xFE00..=0xFE0F           // variation selectors
            | 0xFEFF                    // BOM, zero-width no-break space
            | 0xFFA0
            | 0xFFF9..=0xFFFB           // interlinear annotation
            | 0x110BD | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF         // tags, variation selectors supplement
        )
}

/// `text` on one line, every hidden character made visible (a line feed is
/// `⏎` with no break): for tables and one-line summaries.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match shown(c) {
            Some(s) => out.push_str(&s),
            None => out.push(c),
        }
    }
    out
}

/// `text` with every hidden character made visible, and each line feed
/// shown as `⏎` followed by a real line break and `indent`, so a command
/// on two lines reads as two lines.
pub fn lines(text: &str, indent: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match shown(c) {
            Some(s) => {
                out.push_str(&s);
                if c == '\n' {
                    out.push('\n');
                    out.push_str(indent);
                }
            }
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_feed_is_a_visible_mark_and_a_real_break() {
        assert_eq!(
            lines("cat README.md\nrm -rf ~/projects", "  "),
            "cat README.md⏎\n  rm -rf ~/projects"
        );
        assert_eq!(
            one_line("cat README.md\nrm -rf ~/projects"),
            "cat README.md⏎rm -rf ~/projects"
        );
    }

    #[test]
    fn carriage_returns_controls_and_escapes_are_shown() {
        assert_eq!(one_line("ls\r"), "ls␍");
        assert_eq!(one_line("a\tb"), "a⇥b");
        assert_eq!(one_line("\u{1b}[2J"), "⟨U+001B⟩[2J");
        assert_eq!(one_line("x\u{7f}\u{85}\u{9b}"), "x⟨U+007F⟩⟨U+0085⟩⟨U+009B⟩");
    }

    #[test]
    fn bidi_overrides_and_zero_width_characters_are_named() {
        // "rm" hidden behind a right-to-left override reads backwards.
        assert_eq!(one_line("echo \u{202e}mr"), "echo ⟨U+202E⟩mr");
        assert_eq!(one_line("a\u{2066}b\u{2069}"), "a⟨U+2066⟩b⟨U+2069⟩");
        assert_eq!(
            one_line("r\u{200b}m\u{200d}\u{feff}"),
            "r⟨U+200B⟩m⟨U+200D⟩⟨U+FEFF⟩"
        );
        assert_eq!(one_line("a\u{2028}b"), "a⟨U+2028⟩b");
        assert_eq!(one_line("tag\u{e0041}"), "tag⟨U+E0041⟩");
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let text = "tool:bash:ls -la ~/src | grep 'é' → ok 日本";
        assert_eq!(one_line(text), text);
        assert_eq!(lines(text, "    "), text);
    }
}
