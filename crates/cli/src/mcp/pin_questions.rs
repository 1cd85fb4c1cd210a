//! The proxy's questions about new or changed upstream tool definitions
//! (`docs/mcp.md`, pinned tool definitions): which tools a listing shows,
//! whether the server's instructions reach the agent, and the `mcp-pin`
//! action that asks an operator to accept one.
//!
//! An upstream server chooses how many tools it lists. Each question is an
//! item waiting for a human, counted toward the agent's
//! `limits.max_pending_per_agent`, so at most [`MAX_OPEN`] are open at
//! once about tools still listed: the rest stay hidden, unasked, until
//! those are decided (a question about a tool the server no longer lists
//! is withdrawn). A question the daemon refuses (the limit, a fault) hides
//! its tool too and leaves the other tools and the agent's own calls as
//! they were; no other is asked for [`ASK_BACKOFF`], and no listing asks
//! more than [`MAX_OPEN`], so a server that offers thousands of tools
//! costs the daemon a few requests, not one per tool per listing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::pins::{
    Asked, PIN_TOOL, PinFile, approved_by_a_human, digest, instructions_detail,
    instructions_digest, pin_detail,
};
use super::proxy::Proxy;
use super::upstream::notify_list_changed;
use crate::http::{ClientError, is_settled, path_segment};

/// Most questions about tool definitions open at once per proxy, and
/// most asked in one listing.
pub const MAX_OPEN: usize = 5;

/// How long no question is asked after the daemon refused one.
pub const ASK_BACKOFF: Duration = Duration::from_secs(10);

/// The daemon's longest `reason`.
const MAX_REASON: usize = 4000;

/// `reason` as the daemon takes it: whole when it fits, else cut and
/// saying so, with how much the operator does not see (what follows the
/// cut may be what matters: an instruction at the end of a long
/// description, a `_meta` after it).
fn within_reason(mut reason: String) -> String {
    if reason.len() <= MAX_REASON {
        return reason;
    }
    let total = reason.len();
    let mut end = MAX_REASON - 200;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason.truncate(end);
    reason.push_str(&format!(
        " … [CUT: {} of {total} bytes are not shown; what follows may change what this \
         definition does. Deny unless you have read it whole at its source.]",
        total - end
    ));
    reason
}

impl Proxy {
    /// The digest of tool `name`'s definition as the upstream lists it now,
    /// when an operator accepted it (`None`: unknown, or new or changed
    /// and waiting): what a call is judged under, read again after a
    /// human decided it, so a definition swapped meanwhile is not called.
    pub(super) async fn accepted_digest(&self, name: &str) -> Result<Option<String>, String> {
        let tools = self.upstream_tools().await?;
        let visible = self.accepted(tools).await?;
        Ok(visible.iter().find(|t| t.name == name).map(digest))
    }

    /// The upstream tools an operator accepted (all of them at first
    /// sight); the others are hidden, and asked about: at most
    /// [`MAX_OPEN`] questions open at once and [`MAX_OPEN`] asked per
    /// listing, none for [`ASK_BACKOFF`] after the daemon refused one.
    pub(super) async fn accepted(&self, tools: Vec<Tool>) -> Result<Vec<Tool>, String> {
        let mut file = self.pins.lock().await;
        if !file.existed {
            for t in &tools {
                file.pins.tools.insert(t.name.to_string(), digest(t));
            }
            file.save()?;
            return Ok(tools);
        }
        let listed: HashMap<String, String> = tools
            .iter()
            .map(|t| (t.name.to_string(), digest(t)))
            .collect();
        let mut changed = self.settle_asked(&mut file, &listed).await?;
        let mut visible = Vec::new();
        let (mut held_back, mut tries) = (0, 0);
        for t in tools {
            let name = t.name.to_string();
            let d = digest(&t);
            if file.accepts(&name, &d) {
                visible.push(t);
                continue;
            }
            if file.pins.refused.get(&name) == Some(&d) {
                continue;
            }
            // Asked already: its question is open (`settle_asked`).
            if file.pins.asked.get(&name).is_some_and(|a| a.digest == d) {
                continue;
            }
            // A question of its own already open is asked again in its
            // place (the earlier one withdrawn: a server that changes a
            // definition at every listing keeps one question open, not
            // one per listing); a new one waits while MAX_OPEN others
            // about listed tools are open.
            let replaces = file.pins.asked.contains_key(&name);
            let open = file
                .pins
                .asked
                .keys()
                .filter(|n| listed.contains_key(*n))
                .count();
            let backing_off = file.ask_after.is_some_and(|t| Instant::now() < t);
            if (!replaces && open >= MAX_OPEN) || tries >= MAX_OPEN || backing_off {
                held_back += 1;
                continue;
            }
            tries += 1;
            if let Some(earlier) = file.pins.asked.get(&name).cloned() {
                if let Err(e) = self.withdraw(&earlier.action).await {
                    eprintln!(
                        "actiongate mcp proxy: cannot withdraw the question about the \
                         earlier definition of tool '{name}' (it stays hidden): {e}"
                    );
                    continue;
                }
                file.pins.asked.remove(&name);
                changed = true;
            }
            match self.ask(&name, &d, &t).await {
                Ok(id) => {
                    file.pins.asked.insert(
                        name.clone(),
                        Asked {
                            digest: d.clone(),
                            action: id,
                        },
                    );
                    changed = true;
                }
                Err(e) => {
                    // Most likely the agent's pending limit: the next
                    // tool would be refused too.
                    file.ask_after = Some(Instant::now() + ASK_BACKOFF);
                    eprintln!(
                        "actiongate mcp proxy: cannot ask about the definition of tool '{name}' \
                         (it stays hidden; no question is asked for {} s): {e}",
                        ASK_BACKOFF.as_secs()
                    );
                }
            }
        }
        if held_back > 0 {
            eprintln!(
                "actiongate mcp proxy: {held_back} new or changed tool definitions of '{}' stay \
                 hidden, not asked about yet (at most {MAX_OPEN} questions open, {MAX_OPEN} \
                 asked per listing, none for {} s after the daemon refused one)",
                self.name,
                ASK_BACKOFF.as_secs()
            );
        }
        if changed {
            file.save()?;
        }
        Ok(visible)
    }

    /// Reads each question asked before and keeps only those still open
    /// about tools still listed: a human's approval pins its definition,
    /// a denial refuses it, a question settled otherwise (expired,
    /// withdrawn, approved by a rule) is dropped to be asked again, and
    /// one open about a tool no longer listed, or listed as accepted, is
    /// withdrawn. Whether the pins changed.
    async fn settle_asked(
        &self,
        file: &mut PinFile,
        listed: &HashMap<String, String>,
    ) -> Result<bool, String> {
        let mut changed = false;
        for (name, a) in file.pins.asked.clone() {
            let path = format!("/v1/actions/{}", path_segment(&a.action));
            let action = match self.api.get(&path).await {
                Ok(action) => action,
                // Gone (purged): nothing is open.
                Err(ClientError::Api(p)) if p.status == 404 => json!({"status": "gone"}),
                Err(e) => return Err(e.to_string()),
            };
            let now = listed.get(&name);
            let status = action.get("status").and_then(Value::as_str);
            let open = if approved_by_a_human(&action) {
                if now == Some(&a.digest) || !file.pins.tools.contains_key(&name) {
                    file.pins.tools.insert(name.clone(), a.digest.clone());
                }
                false
            } else if status == Some("denied") {
                file.pins.refused.insert(name.clone(), a.digest.clone());
                false
            } else if status == Some("gone") || is_settled(&action) {
                false
            } else if now.is_none_or(|d| file.accepts(&name, d)) {
                // Open about what is no longer listed (or listed as
                // accepted): kept only while it cannot be withdrawn, and
                // tried again at the next listing.
                match self.withdraw(&a.action).await {
                    Ok(()) => false,
                    Err(e) => {
                        eprintln!(
                            "actiongate mcp proxy: cannot withdraw the question about tool \
                             '{name}', which is no longer listed as asked: {e}"
                        );
                        true
                    }
                }
            } else {
                true
            };
            if !open {
                file.pins.asked.remove(&name);
                changed = true;
            }
        }
        Ok(changed)
    }

    /// The server's instructions to the agent (its answer to
    /// `initialize`) when an operator accepted them, pinned as tool
    /// definitions are: those of the first start are pinned; new or
    /// changed ones are withheld, and asked about, until an operator
    /// approves them (they reach the agent from its next session on). An
    /// upstream that rewrites its instructions talks to the agent as
    /// one that rewrites a tool's description would.
    pub(crate) async fn accepted_instructions(
        &self,
        text: Option<String>,
    ) -> Result<Option<String>, String> {
        let d = instructions_digest(text.as_deref());
        let mut file = self.pins.lock().await;
        let Some(pinned) = file.pins.instructions.clone() else {
            file.pins.instructions = Some(d);
            // A new file is written with the first listing's pins.
            if file.existed {
                file.save()?;
            }
            return Ok(text);
        };
        // None at all withholds nothing.
        if pinned == d || text.is_none() {
            return Ok(text);
        }
        if file.pins.instructions_refused.as_deref() == Some(d.as_str()) {
            return Ok(None);
        }
        let asked = file
            .pins
            .instructions_asked
            .clone()
            .filter(|a| a.digest == d);
        let ask_again = match asked {
            Some(a) => {
                let path = format!("/v1/actions/{}", path_segment(&a.action));
                let action = match self.api.get(&path).await {
                    Ok(action) => action,
                    Err(e) => {
                        eprintln!(
                            "actiongate mcp proxy: cannot read the question about the \
                             instructions of '{}' (they are withheld): {e}",
                            self.name
                        );
                        return Ok(None);
                    }
                };
                if approved_by_a_human(&action) {
                    file.pins.instructions = Some(d);
                    file.pins.instructions_asked = None;
                    file.save()?;
                    return Ok(text);
                }
                if action.get("status").and_then(Value::as_str) == Some("denied") {
                    file.pins.instructions_refused = Some(d);
                    file.pins.instructions_asked = None;
                    file.save()?;
                    return Ok(None);
                }
                is_settled(&action)
            }
            None => true,
        };
        if let Some(earlier) = file.pins.instructions_asked.as_ref()
            && earlier.digest != d
            && let Err(e) = self.withdraw(&earlier.action).await
        {
            eprintln!(
                "actiongate mcp proxy: cannot withdraw the question about the earlier \
                 instructions of '{}' (the new ones are withheld): {e}",
                self.name
            );
            return Ok(None);
        }
        if ask_again {
            let reason = format!(
                "The MCP server '{}' gives the agent new or changed instructions. Approve to \
                 accept them (from the agent's next session on): {}",
                self.name,
                text.as_deref().unwrap_or_default()
            );
            match self
                .ask_operator(instructions_detail(&self.name, &d), reason)
                .await
            {
                Ok(id) => {
                    file.pins.instructions_asked = Some(Asked {
                        digest: d,
                        action: id,
                    });
                    file.save()?;
                }
                Err(e) => eprintln!(
                    "actiongate mcp proxy: cannot ask about the instructions of '{}' (they are \
                     withheld): {e}",
                    self.name
                ),
            }
        }
        Ok(None)
    }

    /// Asks an operator to accept a new or changed definition; the id of
    /// the pending action. When it is decided, the agent's side is told
    /// that the list changed.
    async fn ask(&self, name: &str, d: &str, tool: &Tool) -> Result<String, String> {
        let definition = serde_json::to_string(tool).unwrap_or_default();
        let reason = format!(
            "The MCP server '{}' offers a new or changed definition of tool '{name}'. \
             Approve to accept it: {definition}",
            self.name
        );
        self.ask_operator(pin_detail(&self.name, name, d), reason)
            .await
    }

    /// Withdraws the earlier question `action` (cancels it; one settled
    /// meanwhile needs nothing).
    async fn withdraw(&self, action: &str) -> Result<(), String> {
        match self.api.cancel(action).await {
            Ok(_) => Ok(()),
            Err(ClientError::Api(p)) if p.status == 409 => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Asks the `mcp-pin` action of `detail` with `reason` (cut to what
    /// the daemon takes); the id of the pending action.
    async fn ask_operator(&self, detail: String, reason: String) -> Result<String, String> {
        let reason = within_reason(reason);
        let body = json!({
            "tool": PIN_TOOL,
            "detail": detail,
            "reason": reason,
        });
        let (action, _) = self
            .api
            .create_action(&body, Duration::ZERO)
            .await
            .map_err(|e| e.to_string())?;
        let id = action
            .get("id")
            .and_then(Value::as_str)
            .ok_or("the daemon answered an action without an id")?
            .to_owned();
        let api = self.api.clone();
        let downstream = self.downstream.clone();
        tokio::spawn(async move {
            // Wakes the agent's side once the question is settled; one
            // the proxy withdrew changes no listing (and waking the agent
            // for it would have it list again, and a server that changes
            // a definition at every listing be asked again, without end).
            let mut action = action;
            while !is_settled(&action) {
                match api
                    .wait_settled(action.clone(), Duration::from_secs(3600))
                    .await
                {
                    Ok(a) => action = a,
                    Err(_) => return,
                }
            }
            if action.get("status").and_then(Value::as_str) != Some("cancelled") {
                notify_list_changed(&downstream).await;
            }
        });
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_too_long_says_it_was_cut_and_by_how_much() {
        let short = "accept it: {}".to_owned();
        assert_eq!(within_reason(short.clone()), short);
        let long = format!("accept it: {}é{}", "a".repeat(3990), "b".repeat(900));
        let cut = within_reason(long.clone());
        assert!(cut.len() <= MAX_REASON, "{}", cut.len());
        assert!(cut.contains("[CUT: "), "{cut}");
        assert!(
            cut.contains(&format!("of {} bytes are not shown", long.len())),
            "{cut}"
        );
    }
}
