//! Approval words (seed 003): what a human's short reply means.

/// What a reply means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reply {
    /// "yes", "approve", "ok", "continue".
    Approve,
    /// "no", "reject", "stop", "cancel".
    Deny,
}

/// Reads a reply, ignoring case, surrounding whitespace and punctuation
/// (`"Yes!"`, `"  ok. "`). Anything else is not understood: `None`. A
/// question approves nothing (`"yes?"`, `"approve?"`); it may deny
/// (`"cancel?"`).
pub fn parse_reply(text: &str) -> Option<Reply> {
    let word = text.trim_matches(|c: char| c.is_whitespace() || c.is_ascii_punctuation());
    const APPROVE: &[&str] = &["yes", "approve", "ok", "continue"];
    const DENY: &[&str] = &["no", "reject", "stop", "cancel"];
    if APPROVE.iter().any(|w| w.eq_ignore_ascii_case(word)) && !text.contains('?') {
        Some(Reply::Approve)
    } else if DENY.iter().any(|w| w.eq_ignore_ascii_case(word)) {
        Some(Reply::Deny)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_words_approve() {
        for t in [
            "yes",
            "approve",
            "ok",
            "continue",
            "Yes!",
            "  ok. ",
            "OK",
            "Continue...",
            "\"yes\"",
        ] {
            assert_eq!(parse_reply(t), Some(Reply::Approve), "{t:?}");
        }
    }

    #[test]
    fn denial_words_deny() {
        for t in [
            "no", "reject", "stop", "cancel", "No.", " STOP! ", "cancel?",
        ] {
            assert_eq!(parse_reply(t), Some(Reply::Deny), "{t:?}");
        }
    }

    #[test]
    fn anything_else_is_not_understood() {
        for t in [
            "yes?",
            "approve?",
            "ok?!",
            "",
            "   ",
            "!!!",
            "yes please",
            "nope",
            "okay maybe",
            "y",
            "yes no",
            "o k",
            "yess",
        ] {
            assert_eq!(parse_reply(t), None, "{t:?}");
        }
    }
}
