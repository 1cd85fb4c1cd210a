//! Handler actions as tool definitions: what `GET /v1/tools` and the MCP
//! endpoint offer an agent, and the way back from a tool name to its
//! handler and action.

use serde_json::Value;

use crate::{Caller, Gate, GateResult};

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
}

/// The tool name of a handler action: `<handler>__<action>`, with characters
/// outside `[A-Za-z0-9_-]` replaced so every dialect (OpenAI, Anthropic,
/// MCP) accepts it; at most 64 characters.
pub fn tool_name(handler: &str, action: &str) -> String {
    format!("{handler}__{action}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

impl Gate {
    /// Every action of every handler in service, as tools, in handler then
    /// registration order. Any authenticated caller may list them; the
    /// policy still decides each call.
    pub async fn handler_tools(&self, _caller: &Caller) -> GateResult<Vec<HandlerTool>> {
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
                });
            }
        }
        Ok(tools)
    }

    /// The handler tool called `name`, if one is in service.
    pub async fn handler_tool(
        &self,
        caller: &Caller,
        name: &str,
    ) -> GateResult<Option<HandlerTool>> {
        Ok(self
            .handler_tools(caller)
            .await?
            .into_iter()
            .find(|t| t.name == name))
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
