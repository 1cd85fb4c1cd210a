//! What the operator sees is what runs: text that came from agents (action
//! strings, params, reasons) with every character a terminal would hide or
//! reorder made visible. A line feed is `⏎` (and, in multi-line output, a
//! real line break after it), a carriage return `␍`, a tab `⇥`; other C0
//! and C1 controls, bidirectional overrides and isolates, zero-width and
//! other invisible format characters, and line or paragraph separators
//! are `⟨U+XXXX⟩`. A letter of another script in a word of Latin letters
//! (`https://pаypal.com` with a Cyrillic `а`) is shown with its script's
//! name, `p⟨Cyrillic а⟩ypal`. The same rule as the web page's `visible()`.

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

pub use actiongate_api::text::is_hidden;
use actiongate_api::text::lookalikes;

/// `text` on one line, every hidden character made visible (a line feed is
/// `⏎` with no break): for tables and one-line summaries.
pub fn one_line(text: &str) -> String {
    lines_or_one(text, None)
}

/// `text` with every hidden character made visible, and each line feed
/// shown as `⏎` followed by a real line break and `indent`, so a command
/// on two lines reads as two lines.
pub fn lines(text: &str, indent: &str) -> String {
    lines_or_one(text, Some(indent))
}

fn lines_or_one(text: &str, indent: Option<&str>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut mixed = lookalikes(text).into_iter().peekable();
    // The script of the look-alike letters being written, between `⟨` and
    // `⟩`: letters of one script side by side share the brackets.
    let mut open: Option<&str> = None;
    for (at, c) in text.char_indices() {
        if let Some(l) = mixed.next_if(|l| l.at == at) {
            if open != Some(l.script) {
                if open.is_some() {
                    out.push('⟩');
                }
                out.push('⟨');
                out.push_str(l.script);
                out.push(' ');
                open = Some(l.script);
            }
            out.push(c);
            continue;
        }
        if open.take().is_some() {
            out.push('⟩');
        }
        match shown(c) {
            Some(s) => {
                out.push_str(&s);
                if let (Some(indent), '\n') = (indent, c) {
                    out.push('\n');
                    out.push_str(indent);
                }
            }
            None => out.push(c),
        }
    }
    if open.is_some() {
        out.push('⟩');
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
    fn a_letter_of_another_script_in_a_latin_word_is_named() {
        assert_eq!(
            one_line("curl https://p\u{430}ypal.com"),
            "curl https://p⟨Cyrillic \u{430}⟩ypal.com"
        );
        assert_eq!(
            lines("ls /srv/l\u{3bf}gs\nrm x", "  "),
            "ls /srv/l⟨Greek \u{3bf}⟩gs⏎\n  rm x"
        );
        // Words each in one script stay as they are.
        assert_eq!(one_line("удалить файл x"), "удалить файл x");
        // Letters side by side share their brackets; a word wholly of
        // Cyrillic letters drawn like Latin ones, among Latin words, is
        // named too (a program `ѕѕһ` is not ssh).
        assert_eq!(
            one_line("curl https://p\u{430}\u{443}\u{440}al.com"),
            "curl https://p⟨Cyrillic \u{430}\u{443}\u{440}⟩al.com"
        );
        assert_eq!(
            one_line("\u{455}\u{455}\u{4bb} root@db"),
            "⟨Cyrillic \u{455}\u{455}\u{4bb}⟩ root@db"
        );
        assert_eq!(
            one_line("x\u{3bf}\u{430}y"),
            "x⟨Greek \u{3bf}⟩⟨Cyrillic \u{430}⟩y"
        );
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let text = "tool:bash:ls -la ~/src | grep 'é' → ok 日本";
        assert_eq!(one_line(text), text);
        assert_eq!(lines(text, "    "), text);
    }
}
