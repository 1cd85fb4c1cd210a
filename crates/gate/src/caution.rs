//! A caller's caution: a tool action whose caller cannot vouch that it
//! does only what its tool and detail say (a hook whose runtime rewrites a
//! path, or whose shell may read the line another way) is a human's to
//! decide, whatever rule or grant would allow it.

use actiongate_store::{Decision, DecisionResult};

use crate::{GateError, GateResult};

/// Most characters of a caution.
const MAX_CAUTION: usize = 500;

/// Refuses a caution that is empty, too long, or holds a control
/// character (it is shown to the humans who decide, inside the reason).
pub(crate) fn check_caution(caution: Option<&str>) -> GateResult<()> {
    let Some(c) = caution else { return Ok(()) };
    let n = c.chars().count();
    if n == 0 || n > MAX_CAUTION || c.chars().any(actiongate_api::text::is_hidden) {
        return Err(GateError::invalid(
            "caution",
            format!("1-{MAX_CAUTION} printable characters"),
        ));
    }
    Ok(())
}

/// The rule a cautioned decision records (`{"kind": "caution"}`).
static CAUTION_RULE: std::sync::LazyLock<serde_json::Value> =
    std::sync::LazyLock::new(|| serde_json::json!({"kind": "caution"}));

/// `decision` for an action sent with `caution`: an allow asks, naming
/// why; an ask or a deny is kept as it is.
pub(crate) fn cautioned(decision: Decision, caution: Option<&str>) -> Decision {
    match caution {
        Some(why) if decision.result == DecisionResult::Allow => Decision {
            result: DecisionResult::Ask,
            reason: format!(
                "the caller cannot vouch that it does only what it says ({why}); {} would \
                 allow it, but a human decides",
                decision.reason
            ),
            // Kept with the action: no grant settles it, one made before it
            // was stored (the store's late look) or after (a grant approving
            // what it covers); an operator's approval of it does.
            rule: Some(CAUTION_RULE.clone()),
        },
        _ => decision,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn decision(result: DecisionResult) -> Decision {
        Decision {
            result,
            reason: "rule #0".to_owned(),
            rule: None,
        }
    }

    #[test]
    fn a_caution_turns_an_allow_into_an_ask_and_leaves_the_rest() {
        let asked = cautioned(
            decision(DecisionResult::Allow),
            Some("Gemini may edit another file"),
        );
        assert_eq!(asked.result, DecisionResult::Ask);
        assert!(
            asked.reason.contains("Gemini may edit another file"),
            "{}",
            asked.reason
        );
        for r in [DecisionResult::Ask, DecisionResult::Deny] {
            assert_eq!(cautioned(decision(r), Some("x")).result, r);
        }
        assert_eq!(
            cautioned(decision(DecisionResult::Allow), None).result,
            DecisionResult::Allow
        );
    }

    #[test]
    fn a_caution_is_short_printable_text() {
        assert!(check_caution(None).is_ok());
        assert!(check_caution(Some("a shell may read it otherwise")).is_ok());
        for bad in ["", "a\nb", "\u{202e}x"] {
            assert!(check_caution(Some(bad)).is_err(), "{bad:?}");
        }
        assert!(check_caution(Some(&"x".repeat(501))).is_err());
    }
}
