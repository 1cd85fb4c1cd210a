//! Deciding from chat: a button (verb and item, packed in the button's id)
//! or a reply in words, by a chat user who must be on the connector's list
//! of approvers. The decision takes the API's path through the gate, as
//! `Caller::human("<chat>:<user id>")`.

use actiongate_api::{ApproveRequest, Remember};
use actiongate_gate::decisions::Verdict;
use actiongate_gate::{Caller, ErrorCode, Gate, GateError};
use serde::{Deserialize, Serialize};

use super::card::NOT_SHOWN_WHOLE;

/// The answer to a tap or reply the daemon could not take (its database
/// busy or unreachable): nothing was decided or recorded, so the same tap
/// or reply again is taken afresh.
pub const TRY_AGAIN: &str = "Could not decide now; try again or use the web page.";

/// What a button does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verb {
    /// Approve once.
    Approve,
    /// Approve and remember for an hour.
    Remember,
    /// Approve and remember within the action's session ("for this task").
    Task,
    /// Deny.
    Deny,
}

impl Verb {
    /// The button's label.
    pub fn label(self) -> &'static str {
        match self {
            Verb::Approve => "Approve",
            Verb::Remember => "Approve for 1h",
            // WhatsApp's buttons take at most 20 characters.
            Verb::Task => "Approve for task",
            Verb::Deny => "Deny",
        }
    }

    /// The button's id: `<letter>:<item>` (at most 40 bytes for an action,
    /// within Telegram's 64).
    pub fn button_id(self, item: &str) -> String {
        let letter = match self {
            Verb::Approve => 'a',
            Verb::Remember => 'r',
            Verb::Task => 't',
            Verb::Deny => 'd',
        };
        format!("{letter}:{item}")
    }

    /// The verb and item of a button id.
    pub fn parse(id: &str) -> Option<(Verb, &str)> {
        let (letter, item) = id.split_once(':')?;
        let verb = match letter {
            "a" => Verb::Approve,
            "r" => Verb::Remember,
            "t" => Verb::Task,
            "d" => Verb::Deny,
            _ => return None,
        };
        (!item.is_empty() && item.len() <= 80).then_some((verb, item))
    }
}

/// The note of an "Approve for 1h": the edited card says a grant was made.
pub const GRANT_NOTE: &str = "grant made: the same request is allowed for 1h";

/// The note of an "Approve for task": the edited card says a grant was made.
pub const TASK_GRANT_NOTE: &str =
    "grant made: the same request is allowed in this session until it ends (a day at most)";

/// How long a grant made "for this task" lasts at most (it ends with its
/// session before, if that ends first).
const TASK_GRANT_FOR: &str = "1d";

/// What a stranger (not an approver) is told.
pub const NOT_AN_APPROVER: &str =
    "You are not on this connector's list of approvers: nothing was decided.";

/// Whether `who` is on `approvers`.
pub fn is_approver(approvers: &[String], who: &str) -> bool {
    !who.is_empty() && approvers.iter().any(|a| a == who)
}

/// The prefix of a plan's item (`pl:<plan id>`).
pub const PLAN: &str = "pl:";

/// What approving a plan from chat answers.
const PLAN_APPROVED: &str = "Approved: each of the plan's steps may run once in its session.";

/// Whether `item`'s card, as a chat where `fits` says what text it shows
/// whole shows it, shows all of what would run: only then may that chat
/// approve it (a tap on any Approve button, or a "yes").
async fn shown_whole(
    gate: &Gate,
    caller: &Caller,
    item: &str,
    fits: fn(&str) -> bool,
) -> Result<bool, GateError> {
    if let Some(id) = item.strip_prefix(PLAN) {
        let plan = gate.get_plan(caller, id).await?;
        return Ok(super::card::plan_card(&plan, true).shown_whole(fits));
    }
    let card = match item.strip_prefix("gr:") {
        Some(id) => super::card::grant_request_card(
            &gate
                .get_grant_request(caller, id, std::time::Duration::ZERO)
                .await?,
            true,
        ),
        None => super::card::action_card(
            &gate
                .get_action(caller, item, std::time::Duration::ZERO)
                .await?,
            true,
            false,
        ),
    };
    Ok(card.shown_whole(fits))
}

/// `identity` decides `item` with `verb` in a chat where `fits` says what
/// text it shows whole; the answer shown to them.
pub async fn decide(
    gate: &Gate,
    identity: String,
    verb: Verb,
    item: &str,
    fits: fn(&str) -> bool,
) -> String {
    let caller = Caller::human(identity);
    if verb != Verb::Deny {
        match shown_whole(gate, &caller, item, fits).await {
            Ok(true) => {}
            Ok(false) => return NOT_SHOWN_WHOLE.to_owned(),
            Err(e) => return answer_of(&e),
        }
    }
    let result = if let Some(id) = item.strip_prefix("gr:") {
        match verb {
            Verb::Approve | Verb::Remember | Verb::Task => gate
                .approve_grant_request(&caller, id, ApproveRequest::default())
                .await
                .map(|_| "Approved.".to_owned()),
            Verb::Deny => gate
                .deny_grant_request(&caller, id, None)
                .await
                .map(|_| "Denied.".to_owned()),
        }
    } else if let Some(id) = item.strip_prefix(PLAN) {
        match verb {
            Verb::Approve => gate
                .approve_plan(&caller, id, None)
                .await
                .map(|_| PLAN_APPROVED.to_owned()),
            Verb::Deny => gate
                .deny_plan(&caller, id)
                .await
                .map(|_| "Denied.".to_owned()),
            Verb::Remember | Verb::Task => Ok("Unknown button.".to_owned()),
        }
    } else {
        let verdict = match verb {
            Verb::Approve => Verdict::Approve { note: None },
            Verb::Deny => Verdict::Deny { reason: None },
            Verb::Remember => Verdict::ApproveAndRemember {
                // Shown by the edited card of every chat.
                note: Some(GRANT_NOTE.to_owned()),
                remember: Remember {
                    expires: "1h".to_owned(),
                    scope: None,
                    pattern: None,
                    agent: None,
                    session: None,
                    uses: None,
                },
            },
            Verb::Task => {
                let session = match gate
                    .get_action(&caller, item, std::time::Duration::ZERO)
                    .await
                {
                    Ok(a) => a.session,
                    Err(e) => return answer_of(&e),
                };
                let Some(session) = session else {
                    return "This request belongs to no session: approve it once or for 1h."
                        .to_owned();
                };
                Verdict::ApproveAndRemember {
                    note: Some(TASK_GRANT_NOTE.to_owned()),
                    remember: Remember {
                        expires: TASK_GRANT_FOR.to_owned(),
                        scope: None,
                        pattern: None,
                        agent: None,
                        session: Some(session),
                        uses: None,
                    },
                }
            }
        };
        let done = match verb {
            Verb::Approve => "Approved.",
            Verb::Remember => "Approved, and allowed for 1h.",
            Verb::Task => "Approved, and allowed in this session.",
            Verb::Deny => "Denied.",
        };
        gate.decide(&caller, item, verdict)
            .await
            .map(|a| progress(&a).unwrap_or_else(|| done.to_owned()))
    };
    match result {
        Ok(text) => text,
        Err(e) => answer_of(&e),
    }
}

/// A reply's verb and the reason that may follow a denial: `no, not on a
/// Friday` is a denial with the reason `not on a Friday`. An approval is
/// the whole reply, one approval word as the API's `/reply` takes it
/// (`yes`, `Approve!`): `ok, let me check first`, `approve? this deletes
/// the backups` or `yes no` approve nothing. `None` when not understood.
pub fn parse_reply(text: &str) -> Option<(Verb, Option<String>)> {
    let text = text.trim();
    if let Some(Verdict::Approve { .. }) = Verdict::from_reply(text) {
        return Some((Verb::Approve, None));
    }
    let (first, rest) = match text.find(|c: char| c.is_whitespace() || c == ',' || c == ':') {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let Verdict::Deny { .. } = Verdict::from_reply(first)? else {
        return None;
    };
    let rest = rest
        .trim_matches(|c: char| c.is_whitespace() || c.is_ascii_punctuation())
        .to_owned();
    Some((Verb::Deny, (!rest.is_empty()).then_some(rest)))
}

/// Whether a reply to a card reads as an attempt to decide it: it
/// decides ([`parse_reply`]), or it opens with one of the reply words
/// (`ok, let me check first`, `approve? this deletes the backups`), and is
/// then answered with how to decide. Other talk in the replies (`looks
/// fine to me, checking the logs first`) is not for the gate: it is left
/// alone, from approvers and strangers alike.
pub fn reads_as_decision(text: &str) -> bool {
    if parse_reply(text).is_some() {
        return true;
    }
    let first = text
        .trim()
        .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .next()
        .unwrap_or("");
    let word = first.trim_matches(|c: char| c.is_ascii_punctuation());
    !word.is_empty() && actiongate_policy::parse_reply(word).is_some()
}

/// `identity` replies `text` to `item`'s message in a chat where `fits`
/// says what text it shows whole; the answer shown to them.
pub async fn reply(
    gate: &Gate,
    identity: String,
    item: &str,
    text: &str,
    fits: fn(&str) -> bool,
) -> String {
    let Some((verb, reason)) = parse_reply(text) else {
        return actiongate_gate::decisions::REPLY_HELP.to_owned();
    };
    let caller = Caller::human(identity);
    if verb != Verb::Deny {
        match shown_whole(gate, &caller, item, fits).await {
            Ok(true) => {}
            Ok(false) => return NOT_SHOWN_WHOLE.to_owned(),
            Err(e) => return answer_of(&e),
        }
    }
    let note = Some(match &reason {
        Some(r) => format!("reply: {r}"),
        None => format!("reply: {}", text.trim()),
    });
    let result = if let Some(id) = item.strip_prefix(PLAN) {
        match verb {
            Verb::Deny => gate
                .deny_plan(&caller, id)
                .await
                .map(|_| "Denied.".to_owned()),
            _ => gate
                .approve_plan(&caller, id, None)
                .await
                .map(|_| PLAN_APPROVED.to_owned()),
        }
    } else if let Some(id) = item.strip_prefix("gr:") {
        match verb {
            Verb::Deny => gate
                .deny_grant_request(&caller, id, reason)
                .await
                .map(|_| "Denied.".to_owned()),
            _ => gate
                .approve_grant_request(&caller, id, ApproveRequest::default())
                .await
                .map(|_| "Approved.".to_owned()),
        }
    } else {
        let verdict = match verb {
            Verb::Deny => Verdict::Deny { reason: note },
            _ => Verdict::Approve { note },
        };
        let done = if verb == Verb::Deny {
            "Denied."
        } else {
            "Approved."
        };
        gate.decide(&caller, item, verdict)
            .await
            .map(|a| progress(&a).unwrap_or_else(|| done.to_owned()))
    };
    match result {
        Ok(t) => t,
        Err(e) => answer_of(&e),
    }
}

/// Whether `answer` (of [`decide`] or [`reply`]) tells of a decision just
/// made, which the outcome edit of the item's message shows to everyone:
/// chats that cannot answer one user alone say nothing more.
pub fn shown_by_the_edit(answer: &str) -> bool {
    answer.starts_with("Approved") || answer == "Denied."
}

/// What an approval that left `action` pending answers: how many of how
/// many, and who (`None` once it settled).
fn progress(action: &actiongate_gate::Action) -> Option<String> {
    if action.status != actiongate_gate::ActionStatus::Pending {
        return None;
    }
    let t = &action.team;
    let who: Vec<&str> = t.approvals.iter().map(|a| a.who.as_str()).collect();
    Some(format!(
        "Your approval is recorded: {} of {} ({}).",
        t.approvals.len(),
        t.approvals_required.unwrap_or(1),
        who.join(", ")
    ))
}

/// A gate error as a chat user reads it.
fn answer_of(e: &GateError) -> String {
    match e.code {
        ErrorCode::ActionSettled | ErrorCode::GrantRequestSettled => "Already decided.".to_owned(),
        ErrorCode::NotFound => "No such item.".to_owned(),
        ErrorCode::Validation => format!("Not done: {}", e.detail),
        ErrorCode::Forbidden => format!("Not allowed: {}", e.detail),
        ErrorCode::Conflict => format!("Not done: {}", e.detail),
        _ => TRY_AGAIN.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_opens_with_a_reply_word_reads_as_a_decision() {
        for t in [
            "yes",
            "No, not on a Friday",
            "ok, let me check first",
            "approve? this deletes the backups",
            "yes no",
            "Cancel!",
        ] {
            assert!(reads_as_decision(t), "{t}");
        }
        for t in [
            "looks fine to me, checking the logs first",
            "who asked for this?",
            "",
            "?!",
            "nope",
            "okay then",
        ] {
            assert!(!reads_as_decision(t), "{t}");
        }
    }

    #[test]
    fn button_ids_round_trip() {
        for v in [Verb::Approve, Verb::Remember, Verb::Deny] {
            let id = v.button_id("0193-abc");
            assert_eq!(Verb::parse(&id), Some((v, "0193-abc")));
        }
        assert_eq!(Verb::parse("x:1"), None);
        assert_eq!(Verb::parse("a:"), None);
        assert!(Verb::button_id(Verb::Approve, "gr:0193").len() < 64);
    }

    #[test]
    fn replies_take_a_word_and_a_reason() {
        assert_eq!(parse_reply("yes"), Some((Verb::Approve, None)));
        assert_eq!(
            parse_reply("No, not on a Friday."),
            Some((Verb::Deny, Some("not on a Friday".to_owned())))
        );
        assert_eq!(
            parse_reply("STOP: tests fail"),
            Some((Verb::Deny, Some("tests fail".to_owned())))
        );
        assert_eq!(parse_reply("maybe later"), None);
        assert_eq!(parse_reply("nope"), None);
        assert_eq!(parse_reply("Approve!"), Some((Verb::Approve, None)));
    }

    /// An approval is the whole reply: a word that opens a sentence, a
    /// question or a contradiction approves nothing (a denial may carry a
    /// reason: denying on a misread is the safe side).
    #[test]
    fn an_approval_word_approves_only_alone() {
        for t in [
            "ok, let me check with the DB team first",
            "approve? this deletes the backups",
            "yes no",
            "continue: only after the freeze ends",
            "yes?",
            "ok?!",
            "yes please",
        ] {
            assert_eq!(parse_reply(t), None, "{t:?}");
        }
        assert_eq!(
            parse_reply("no? why is it deleting"),
            Some((Verb::Deny, Some("why is it deleting".to_owned())))
        );
    }

    #[test]
    fn approvers_match_exactly() {
        let list = vec!["42".to_owned()];
        assert!(is_approver(&list, "42"));
        assert!(!is_approver(&list, "421"));
        assert!(!is_approver(&list, ""));
    }
}
