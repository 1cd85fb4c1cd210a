//! Sessions: the task an action belongs to, as the agent runtime names it
//! (a coding agent's session id, an MCP client's, a client's run). This
//! module owns what a session id and a runtime slug may be; listing and
//! ending sessions, and what is scoped to one (grants, plans, taint), build
//! on it.

use crate::{GateError, GateResult};

/// What a session's `tainted_by` holds when a run reported without a
/// decision (`POST /v1/runs`) tainted it: no action of the gate's did.
pub const UNDECIDED_RUN: &str = "run";

/// Most characters of a session id.
pub const MAX_SESSION: usize = 200;
/// Most characters of a runtime slug.
pub const MAX_RUNTIME: usize = 64;

/// A session id: 1-200 printable characters (no control characters, no
/// invisible or reordering ones such as bidi overrides, zero-width spaces
/// and tags, no leading or trailing whitespace: nothing that would make two
/// ids look the same, or one read as another, where a human sees it). The
/// OpenAPI pattern of a session id says the same, over code points (JSON
/// Schema's patterns are ECMA-262's with the `u` flag).
pub fn validate_session(field: &str, id: &str) -> GateResult<()> {
    let n = id.chars().count();
    let printable = !id.chars().any(actiongate_api::text::is_hidden);
    if n == 0 || n > MAX_SESSION || !printable || id.trim() != id {
        return Err(GateError::invalid(
            field,
            format!(
                "1-{MAX_SESSION} printable characters (no invisible or bidi ones), no \
                 surrounding whitespace"
            ),
        ));
    }
    Ok(())
}

/// A session id to look up (read, end, page after): one
/// [`validate_session`] takes, or one an earlier version stored, which let
/// hidden characters beyond the BMP (tags) through. Such a session can
/// still be read and ended, and a list paged past it; no new one is made.
pub fn validate_stored_session(field: &str, id: &str) -> GateResult<()> {
    let n = id.chars().count();
    let printable = !id
        .chars()
        .any(|c| actiongate_api::text::is_hidden(c) && u32::from(c) <= 0xFFFF);
    if n == 0 || n > MAX_SESSION || !printable || id.trim() != id {
        return validate_session(field, id);
    }
    Ok(())
}

/// A runtime slug such as `claude-code`: 1-64 of `a-z 0-9 - _ .`, starting
/// with a letter or digit.
pub fn validate_runtime(runtime: &str) -> GateResult<()> {
    let ok = !runtime.is_empty()
        && runtime.len() <= MAX_RUNTIME
        && runtime
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && runtime.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        });
    if ok {
        Ok(())
    } else {
        Err(GateError::invalid(
            "runtime",
            "1-64 characters from a-z 0-9 - _ . starting with a letter or digit",
        ))
    }
}

/// Validates an optional session and runtime as sent with a request.
pub fn validate_origin(session: Option<&str>, runtime: Option<&str>) -> GateResult<()> {
    if let Some(s) = session {
        validate_session("session", s)?;
    }
    if let Some(r) = runtime {
        validate_runtime(r)?;
    }
    Ok(())
}

impl crate::Gate {
    /// Refuses `session` when another agent's (422 naming `session`, as
    /// acting in it is refused): for calls that name a session without
    /// acting in it (a check, a reported run), so that no agent reads
    /// another's session (its taint, its grants) nor writes in its name.
    pub async fn own_session(&self, agent: &str, session: Option<&str>) -> GateResult<()> {
        let Some(id) = session else { return Ok(()) };
        match self.store().session_owner(id).await? {
            Some(owner) if owner != agent => Err(GateError::invalid(
                "session",
                format!("session '{id}' is another agent's"),
            )),
            _ => Ok(()),
        }
    }

    /// The agent a grant scoped to `session` is for: the session's owner.
    /// A grant naming no agent would otherwise go to whichever agent named
    /// the session first, so one for a session nobody has used yet must
    /// name its agent; one naming another agent than the owner is refused.
    pub(crate) async fn session_grant_agent(
        &self,
        field: &str,
        session: &str,
        agent: Option<String>,
    ) -> GateResult<String> {
        let owner = self
            .refuse_ended(
                session,
                "grant without the session, or let the agent ask in an open one",
            )
            .await?;
        match (owner, agent) {
            (Some(owner), Some(a)) if owner != a => Err(GateError::invalid(
                field,
                format!("session '{session}' is agent '{owner}''s, not '{a}''s"),
            )),
            (Some(owner), _) => Ok(owner),
            (None, Some(a)) => Ok(a),
            (None, None) => Err(GateError::invalid(
                field,
                format!(
                    "no agent has used session '{session}' yet: name the agent the grant is for"
                ),
            )),
        }
    }

    /// Refuses a grant for `session` when it has ended (or gone idle): it
    /// opens again with no grants, so the grant would be revoked by its
    /// next action, an approval lost without a sign (race review).
    /// `instead` says what the operator can do. Else the session's owner,
    /// when anyone has used it (read once with its state). The store looks
    /// again in the transaction that writes the grant, so a session ended
    /// in between refuses it too (ended by hand or swept idle; one that
    /// went idle but was not swept yet voids it at its next action).
    pub(crate) async fn refuse_ended(
        &self,
        session: &str,
        instead: &str,
    ) -> GateResult<Option<String>> {
        match self
            .store()
            .get_session(session, self.idle_before())
            .await?
        {
            Some(s) if s.status == "ended" => Err(GateError::conflict(format!(
                "session '{session}' has ended: a grant for it would be void when it opens \
                 again; {instead}"
            ))),
            s => Ok(s.map(|s| s.agent)),
        }
    }
}

/// Most uses a counted grant may be given.
pub const MAX_USES: i64 = 10_000;

/// The session and count of uses a grant is limited to, checked; `prefix`
/// names the body's object holding them (`remember.`) or is empty.
pub fn grant_scope(
    prefix: &str,
    session: Option<String>,
    uses: Option<i64>,
) -> GateResult<(Option<String>, Option<i64>)> {
    if let Some(s) = &session {
        validate_session(&format!("{prefix}session"), s)?;
    }
    if let Some(n) = uses
        && !(1..=MAX_USES).contains(&n)
    {
        return Err(GateError::invalid(
            format!("{prefix}uses"),
            format!("must be 1-{MAX_USES}"),
        ));
    }
    Ok((session, uses))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_is_printable_and_bounded() {
        assert!(validate_session("session", "abc-123 ok").is_ok());
        assert!(validate_session("session", &"x".repeat(200)).is_ok());
        assert!(validate_session("session", &"x".repeat(201)).is_err());
        assert!(validate_session("session", "").is_err());
        assert!(validate_session("session", "a\nb").is_err());
        assert!(validate_session("session", " a").is_err());
        // What would reorder or hide text where a human reads the id.
        assert!(validate_session("session", "work\u{202e}gnp").is_err());
        assert!(validate_session("session", "a\u{200b}b").is_err());
        // Blank Braille looks like nothing: `x` and `x\u{2800}` would be two
        // sessions that read the same.
        assert!(validate_session("session", "x\u{2800}").is_err());
        assert!(validate_session("session", "a\u{2800}b").is_err());
        assert!(validate_session("session", "\u{feff}a").is_err());
        // Drawn as nothing by browsers (review: Chromium, zero width).
        assert!(validate_session("session", "a\u{fff0}b").is_err());
        assert!(validate_session("session", "a\u{fff8}b").is_err());
        // Tags beyond the BMP: `x` followed by invisible letters.
        assert!(validate_session("session", "x\u{e0041}\u{e0042}").is_err());
        assert!(validate_session("session", "a\u{1d173}b").is_err());
        assert!(validate_session("session", "emoji-\u{1f600}").is_ok());
        // One an earlier version stored can still be looked up.
        assert!(validate_stored_session("id", "x\u{e0041}").is_ok());
        assert!(validate_stored_session("id", "a\u{200b}b").is_err());
        assert!(validate_stored_session("id", "").is_err());
    }

    /// The pattern the OpenAPI document gives a session id (every copy of
    /// it) takes what [`validate_session`] takes, character by character,
    /// inside an id and at either end (beyond the BMP, inside one): a
    /// client validating by the schema is refused nothing it sent in good
    /// faith, and a fuzzer drawing from it finds no difference.
    #[test]
    fn the_openapi_pattern_of_a_session_id_is_what_is_validated() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../openapi/openapi.json")).unwrap();
        let mut patterns = Vec::new();
        collect_session_patterns(&doc, &mut patterns);
        patterns.sort();
        patterns.dedup();
        assert_eq!(patterns.len(), 1, "{patterns:?}");
        // ECMA's `\uXXXX` as the regex crate spells it.
        let pattern = regex::Regex::new(r"\\u([0-9a-fA-F]{4})")
            .unwrap()
            .replace_all(&patterns[0], r"\x{$1}")
            .into_owned();
        let re = regex::Regex::new(&pattern).unwrap();
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let ids = if u32::from(c) <= 0xFFFF {
                vec![format!("a{c}b"), format!("{c}b"), format!("a{c}")]
            } else {
                vec![format!("a{c}b")]
            };
            for id in ids {
                assert_eq!(
                    re.is_match(&id),
                    validate_session("session", &id).is_ok(),
                    "U+{:04X} in {id:?}",
                    u32::from(c)
                );
            }
        }
    }

    /// Every `pattern` of a schema whose `maxLength` is a session id's.
    fn collect_session_patterns(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let (Some(p), Some(200)) = (
                    m.get("pattern").and_then(|p| p.as_str()),
                    m.get("maxLength").and_then(serde_json::Value::as_u64),
                ) && p.contains("{0,198}")
                {
                    out.push(p.to_owned());
                }
                m.values().for_each(|x| collect_session_patterns(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| collect_session_patterns(x, out)),
            _ => {}
        }
    }

    #[test]
    fn a_runtime_is_a_slug() {
        assert!(validate_runtime("claude-code").is_ok());
        assert!(validate_runtime("gemini-cli").is_ok());
        assert!(validate_runtime("Claude").is_err());
        assert!(validate_runtime("-x").is_err());
        assert!(validate_runtime("a b").is_err());
    }
}
