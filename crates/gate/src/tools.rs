//! Handler actions as tool definitions: what `GET /v1/tools` and the MCP
//! endpoint offer an agent, and the way back from a tool name to its
//! handler and action. The list is kept in memory until a handler changes
//! (see [`Gate::handlers_changed`]); with several daemons on one database,
//! [`watch_handlers`] notices changes made through the others.

use std::sync::Arc;
use std::time::Duration;

use actiongate_api::ActionHints;
use serde_json::Value;

use crate::{Caller, Gate, GateResult};

/// The tools of every handler in service, as listed once.
pub type HandlerTools = Arc<Vec<HandlerTool>>;

/// One registered handler action, described as a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerTool {
    /// The tool name ([`tool_name`]).
    pub name: String,
    /// The handler's id.
    pub handler: String,
    /// The action's name.
    pub action: String,
    /// The action's description, or its name and the handler's name.
    pub description: String,
    /// The JSON Schema of the action's params.
    pub params_schema: Value,
    /// The handler's display name.
    pub handler_name: String,
    /// What the handler declared about the action (display hints only).
    pub hints: ActionHints,
}

pub use actiongate_api::tool_name;

impl Gate {
    /// Every action of every handler in service, as tools, in handler then
    /// registration order. Any authenticated caller may list them; the
    /// policy still decides each call.
    pub async fn handler_tools(&self, _caller: &Caller) -> GateResult<HandlerTools> {
        let ticket = match self.tools_cache().get("") {
            Ok(tools) => return Ok(tools),
            Err(ticket) => ticket,
        };
        let mut tools = Vec::new();
        for record in self.store().list_handlers(false).await? {
            let handler = self.handler(&record.id).await?;
            for a in &handler.actions {
                tools.push(HandlerTool {
                    name: tool_name(&record.id, &a.decl.name),
                    handler: record.id.clone(),
                    action: a.decl.name.clone(),
                    description: a
                        .decl
                        .description
                        .clone()
                        .unwrap_or_else(|| format!("{} ({})", a.decl.name, record.name)),
                    params_schema: a.decl.params_schema.clone(),
                    handler_name: record.name.clone(),
                    hints: a.decl.hints.clone().unwrap_or_default(),
                });
            }
        }
        let tools = Arc::new(tools);
        self.tools_cache().insert(ticket, "", tools.clone());
        Ok(tools)
    }

    /// The handler tool called `name`, if exactly one is in service: a
    /// name two actions share (registered before such clashes were
    /// refused) says neither, and calls none.
    pub async fn handler_tool(
        &self,
        caller: &Caller,
        name: &str,
    ) -> GateResult<Option<HandlerTool>> {
        let tools = self.handler_tools(caller).await?;
        let mut named = tools.iter().filter(|t| t.name == name);
        Ok(match (named.next(), named.next()) {
            (Some(t), None) => Some(t.clone()),
            _ => None,
        })
    }
}

/// What identifies the handlers' registrations at one moment: their ids,
/// and when each was last replaced or retired.
fn fingerprint(records: &[actiongate_store::HandlerRecord]) -> Vec<(String, i64, Option<i64>)> {
    let mut f: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.id.clone(),
                r.updated_at.timestamp_micros(),
                r.retired_at.map(|t| t.timestamp_micros()),
            )
        })
        .collect();
    f.sort();
    f
}

/// With several daemons on one database, reads the handlers' registrations
/// every `every` and treats a difference as a change made here: caches are
/// dropped and [`Gate::handlers_changed`] fires, so MCP sessions on this
/// daemon hear of handlers registered through another. Ends with the gate.
pub async fn watch_handlers(gate: Gate, every: Duration) {
    let mut last = None;
    let shutdown = gate.shutdown().clone();
    loop {
        match gate.store().list_handlers(true).await {
            Ok(records) => {
                let now = fingerprint(&records);
                if last.as_ref().is_some_and(|l| *l != now) {
                    tracing::debug!("handlers changed on another daemon");
                    gate.handlers_changed_elsewhere();
                }
                last = Some(now);
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the handlers to follow changes"),
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tool_name;

    #[test]
    fn tool_names_keep_to_the_common_charset() {
        assert_eq!(tool_name("email", "send"), "email__send");
        assert_eq!(tool_name("a.b", "c d"), "a_b__c_d");
        assert_eq!(tool_name(&"x".repeat(80), "y").len(), 64);
    }
}
