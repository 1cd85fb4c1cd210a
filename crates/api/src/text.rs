//! Text an agent sends that a human reads: which characters would hide
//! or reorder what is shown around them, and how a long one is cut.

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
