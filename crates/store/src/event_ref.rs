//! A decided decision-only action's first event, stored by reference to
//! its row (SQLite only).
//!
//! The event that records a new action carries the whole action as JSON,
//! and for a decision-only action allowed or denied when asked that JSON
//! says nothing the action's row does not: it was half of the database's
//! bytes per action. Such an event's `data` column holds a mark instead
//! ([`MARK_V1`], then the action's findings when it has any), and readers
//! render the JSON from the row again with [`ActionV1`].
//!
//! What makes that safe:
//!
//! * The rendering is frozen. [`ActionV1`] is a copy of the wire `Action`'s
//!   shape as it was when the mark was made, used for nothing else; a
//!   change to `Action` changes neither it nor events already stored (the
//!   audit chain hashes the data, and anchors sign the chain). A new shape
//!   would be a new mark.
//! * An event is stored by reference only when its JSON rendered this way
//!   is the very text published ([`reference`] compares the bytes): any
//!   action the frozen shape cannot say exactly (a handler's, a pending
//!   one, one with team fields) keeps its whole JSON.
//! * It reads only columns that never change once an action is decided,
//!   and derives the rest (status, `decided_at`) from them; migration 0024's
//!   triggers refuse any change to those columns of a decided action, and
//!   its deletion while an event refers to it.
//! * Retention that deletes an action first writes its by-reference events'
//!   JSON in full ([`crate::SqliteStore::prune_records`]).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::error::StoreError;
use crate::row::Cols;
use crate::time::{from_ms, rfc3339};
use actiongate_api::model::{Action, ActionStatus, Json};

/// The first bytes of a by-reference event's `data`: never the start of
/// JSON text. The action's findings follow, as JSON, unless it has none.
pub(crate) const MARK_V1: &str = "@1";

/// The action columns a by-reference event is rendered from, as the
/// SQLite event queries select them (joined as `r`, see `stored_from!`).
macro_rules! ref_columns {
    () => {
        "r.id AS r_id, r.agent AS r_agent, r.tool AS r_tool, r.detail AS r_detail, \
         r.action_string AS r_action_string, r.reason AS r_reason, \
         r.decision_result AS r_result, r.decision_reason AS r_decision_reason, \
         r.decision_rule AS r_rule, r.created_at AS r_created_at, \
         r.decided_by AS r_decided_by, r.params_view AS r_params, \
         r.session AS r_session, r.runtime AS r_runtime"
    };
}
pub(crate) use ref_columns;

/// An action's columns a by-reference event is rendered from.
struct Columns<'a> {
    id: &'a str,
    agent: &'a str,
    tool: &'a str,
    detail: &'a str,
    action_string: &'a str,
    reason: Option<&'a str>,
    result: &'a str,
    decision_reason: &'a str,
    rule: Option<&'a str>,
    created_at: i64,
    decided_by: Option<&'a str>,
    params: Option<&'a str>,
    session: Option<&'a str>,
    runtime: Option<&'a str>,
}

/// The wire `Action` of a decision-only action decided when asked, as it
/// was rendered when [`MARK_V1`] was made: field order, names, what is
/// written when empty. Frozen: never change it (see the module's docs).
#[derive(Serialize)]
struct ActionV1<'a> {
    id: &'a str,
    agent: &'a str,
    tool: &'a str,
    detail: &'a str,
    action_string: &'a str,
    reason: Option<&'a str>,
    status: &'static str,
    decision: DecisionV1<'a>,
    findings: &'a RawValue,
    #[serde(serialize_with = "rfc3339::serialize")]
    created_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339::serialize")]
    decided_at: DateTime<Utc>,
    decided_by: Option<&'a str>,
    deadline: Option<()>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
    session: Option<&'a str>,
    runtime: Option<&'a str>,
}

#[derive(Serialize)]
struct DecisionV1<'a> {
    result: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'a RawValue>,
}

/// What an action decided when asked stands as: its result's status.
fn status_of(result: &str) -> Option<&'static str> {
    match result {
        "allow" => Some("approved"),
        "deny" => Some("denied"),
        _ => None,
    }
}

fn raw(text: &str) -> serde_json::Result<&RawValue> {
    serde_json::from_str(text)
}

/// The JSON of `cols` with `findings` (JSON text) as [`ActionV1`] says it.
fn render_v1(cols: &Columns<'_>, findings: &str) -> Result<String, StoreError> {
    let status = status_of(cols.result).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "event by reference to action {}, which was not decided when asked",
            cols.id
        ))
    })?;
    let created = from_ms(cols.created_at);
    let action = ActionV1 {
        id: cols.id,
        agent: cols.agent,
        tool: cols.tool,
        detail: cols.detail,
        action_string: cols.action_string,
        reason: cols.reason,
        status,
        decision: DecisionV1 {
            result: cols.result,
            reason: cols.decision_reason,
            rule: cols.rule.map(raw).transpose()?,
        },
        findings: raw(findings)?,
        created_at: created,
        decided_at: created,
        decided_by: cols.decided_by,
        deadline: None,
        params: cols.params.map(raw).transpose()?,
        session: cols.session,
        runtime: cols.runtime,
    };
    Ok(serde_json::to_string(&action)?)
}

/// The `data` to store for the first event of a new action instead of
/// `rendered` (its JSON as published), when the row says the same; `None`
/// when the event must keep its JSON. `rule` and `params_view` are the
/// columns' text as the row stores them.
pub(crate) fn reference(
    action: &Action,
    rendered: &Json,
    rule: Option<&str>,
    params_view: Option<&str>,
) -> Option<String> {
    let settled = matches!(action.status, ActionStatus::Approved | ActionStatus::Denied);
    if !settled || action.handler.is_some() || action.deadline.is_some() {
        return None;
    }
    let findings = if action.findings.is_empty() {
        None
    } else {
        Some(serde_json::to_string(&action.findings).ok()?)
    };
    let cols = Columns {
        id: &action.id,
        agent: &action.agent,
        tool: &action.tool,
        detail: &action.detail,
        action_string: &action.action_string,
        reason: action.reason.as_deref(),
        result: action.decision.result.as_str(),
        decision_reason: &action.decision.reason,
        rule,
        created_at: crate::time::to_ms(action.created_at),
        decided_by: action.decided_by.as_deref(),
        params: params_view,
        session: action.session.as_deref(),
        runtime: action.runtime.as_deref(),
    };
    let again = render_v1(&cols, findings.as_deref().unwrap_or("[]")).ok()?;
    (again == rendered.get()).then(|| match findings {
        Some(f) => format!("{MARK_V1}{f}"),
        None => MARK_V1.to_owned(),
    })
}

/// Whether a stored event's `data` is a reference, not JSON.
pub(crate) fn is_reference(data: &str) -> bool {
    data.starts_with('@')
}

/// The JSON of a by-reference event whose `data` is `mark`, from the
/// action columns of `row` (selected with [`ref_columns!`]).
pub(crate) fn render(mark: &str, seq: i64, row: &impl Cols) -> Result<Json, StoreError> {
    let findings = match mark.strip_prefix(MARK_V1) {
        Some("") => "[]",
        Some(f) => f,
        None => {
            return Err(StoreError::Corrupt(format!(
                "event {seq} holds an unknown reference {mark:?}"
            )));
        }
    };
    let Some(id) = row.text("r_id")? else {
        return Err(StoreError::Corrupt(format!(
            "event {seq} refers to an action that is not stored"
        )));
    };
    let text = |col: &str| row.text(col);
    let need = |col: &str| -> Result<String, StoreError> {
        text(col)?.ok_or_else(|| StoreError::Corrupt(format!("action {id}: {col} is NULL")))
    };
    let (agent, tool, detail) = (need("r_agent")?, need("r_tool")?, need("r_detail")?);
    let (action_string, result) = (need("r_action_string")?, need("r_result")?);
    let decision_reason = need("r_decision_reason")?;
    let (reason, rule, decided_by) = (text("r_reason")?, text("r_rule")?, text("r_decided_by")?);
    let (params, session, runtime) = (text("r_params")?, text("r_session")?, text("r_runtime")?);
    let created_at = row
        .int("r_created_at")?
        .ok_or_else(|| StoreError::Corrupt(format!("action {id}: created_at is NULL")))?;
    let cols = Columns {
        id: &id,
        agent: &agent,
        tool: &tool,
        detail: &detail,
        action_string: &action_string,
        reason: reason.as_deref(),
        result: &result,
        decision_reason: &decision_reason,
        rule: rule.as_deref(),
        created_at,
        decided_by: decided_by.as_deref(),
        params: params.as_deref(),
        session: session.as_deref(),
        runtime: runtime.as_deref(),
    };
    Ok(Json::from_text(render_v1(&cols, findings)?)?)
}

/// Writes the JSON of every by-reference event of the actions `ids` in
/// full, so that the actions can be deleted and their events still read
/// (retention deletes actions on its own clock, and keeps events on
/// another). In the caller's transaction.
pub(crate) async fn write_out(
    conn: &mut sqlx::SqliteConnection,
    ids: &[String],
) -> Result<(), StoreError> {
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(concat!(
        "SELECT ",
        crate::events::stored_columns!(),
        " FROM ",
        crate::events::stored_from!(),
        " WHERE substr(events.data, 1, 1) = '@' AND events.action_id IN ("
    ));
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(id.clone());
    }
    q.push(")");
    let rows = q.build().fetch_all(&mut *conn).await?;
    for row in &rows {
        let ev = crate::events::from_row(row)?;
        sqlx::query("UPDATE events SET data = ? WHERE seq = ?")
            .bind(ev.data.get())
            .bind(ev.seq)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cols() -> Columns<'static> {
        Columns {
            id: "01a25080-1487-74ba-8a03-b860d3ebb050",
            agent: "bench",
            tool: "file",
            detail: "view /tmp/x \"quoted\" \u{1f} é",
            action_string: "tool:file:view /tmp/x \"quoted\" \u{1f} é",
            reason: Some("look"),
            result: "allow",
            decision_reason: "allowed by allow pattern #0 `tool:file:view\\s.*`",
            rule: Some(
                r#"{"index":0,"kind":"pattern","list":"allow","pattern":"tool:file:view\\s.*"}"#,
            ),
            created_at: 1_796_646_900_871,
            decided_by: Some("policy"),
            params: Some(r#"{"a":[1,2.5,null],"b":"c"}"#),
            session: Some("s-1"),
            runtime: None,
        }
    }

    /// The frozen shape, byte for byte: if this fails, `ActionV1` changed,
    /// and every event stored by reference would read differently.
    #[test]
    fn the_frozen_shape_renders_what_it_always_did() {
        let text = render_v1(&cols(), r#"["writes"]"#).unwrap();
        let want = concat!(
            r#"{"id":"01a25080-1487-74ba-8a03-b860d3ebb050","agent":"bench","tool":"file","#,
            r#""detail":"view /tmp/x \"quoted\" \u001f é","#,
            r#""action_string":"tool:file:view /tmp/x \"quoted\" \u001f é","reason":"look","#,
            r#""status":"approved","decision":{"result":"allow","#,
            r#""reason":"allowed by allow pattern #0 `tool:file:view\\s.*`","#,
            r#""rule":{"index":0,"kind":"pattern","list":"allow","pattern":"tool:file:view\\s.*"}},"#,
            r#""findings":["writes"],"created_at":"2026-12-07T12:35:00.871Z","#,
            r#""decided_at":"2026-12-07T12:35:00.871Z","decided_by":"policy","deadline":null,"#,
            r#""params":{"a":[1,2.5,null],"b":"c"},"session":"s-1","runtime":null}"#
        );
        assert_eq!(text, want);
        let mut denied = cols();
        denied.result = "deny";
        denied.rule = None;
        denied.params = None;
        denied.reason = None;
        let text = render_v1(&denied, "[]").unwrap();
        assert!(text.contains(r#""reason":null,"status":"denied","decision":{"result":"deny","reason":"allowed by allow pattern #0 `tool:file:view\\s.*`"},"findings":[]"#), "{text}");
        assert!(!text.contains("params"), "{text}");
    }

    #[test]
    fn an_action_not_decided_when_asked_cannot_be_rendered() {
        let mut c = cols();
        c.result = "ask";
        assert!(matches!(render_v1(&c, "[]"), Err(StoreError::Corrupt(_))));
    }
}
