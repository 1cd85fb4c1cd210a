//! Tool definition pins of `mcp proxy`: a digest of each upstream tool's
//! definition (name, title, description, input and output schemas,
//! annotations), kept in a JSON state file. The first listing pins every
//! tool (trust on first use); a tool that appears later, or whose
//! definition changes, stays hidden until an operator accepts it by
//! approving the decision-only action `tool:mcp-pin:<server>/<tool> <digest>`
//! (a policy rule or a grant that approves it does not count).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The action tool an operator approves to accept a tool definition.
pub const PIN_TOOL: &str = "mcp-pin";

/// The digest of a tool's definition: SHA-256 of its canonical JSON
/// (object keys sorted), hex. Its `icons` (URLs the client fetches) and
/// `_meta` (which some clients act on, as a template to render) count
/// when the tool has them; a tool without either keeps the digest it was
/// pinned at before they counted.
pub fn digest(tool: &Tool) -> String {
    let mut def = json!({
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": *tool.input_schema,
        "outputSchema": tool.output_schema.as_deref(),
        "annotations": tool.annotations,
    });
    if let Some(icons) = &tool.icons {
        def["icons"] = json!(icons);
    }
    if let Some(meta) = &tool.meta {
        def["_meta"] = json!(meta);
    }
    // serde_json's maps are sorted by key, so the text is canonical.
    hex::encode(Sha256::digest(def.to_string().as_bytes()))
}

/// A definition waiting for an operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Asked {
    /// The digest asked about.
    pub digest: String,
    /// The pending `mcp-pin` action.
    pub action: String,
}

/// The state file's content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pins {
    /// Accepted digests by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, String>,
    /// Definitions asked about, by tool name.
    #[serde(default)]
    pub asked: BTreeMap<String, Asked>,
    /// Digests an operator refused, by tool name (not asked again).
    #[serde(default)]
    pub refused: BTreeMap<String, String>,
    /// The server's instructions to the agent (its answer to
    /// `initialize`): the accepted digest ([`instructions_digest`]; that
    /// of none when it gave none), the question open about others, and
    /// the digest an operator refused. A file written before they were
    /// pinned has none: the instructions of the next start are pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The open question about the server's instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_asked: Option<Asked>,
    /// Instructions an operator refused (not asked again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_refused: Option<String>,
}

/// The digest of a server's instructions (`None`: it gave none), as
/// [`digest`] is of a tool.
pub fn instructions_digest(text: Option<&str>) -> String {
    let def = json!({ "instructions": text });
    hex::encode(Sha256::digest(def.to_string().as_bytes()))
}

/// The detail of the `mcp-pin` action for the instructions of `server`
/// (a server name holds no space, a tool's detail a `/`).
pub fn instructions_detail(server: &str, digest: &str) -> String {
    format!("{server} instructions sha256:{digest}")
}

/// The pins of one server, with the file they live in.
#[derive(Debug)]
pub struct PinFile {
    path: PathBuf,
    /// Whether the file existed (false: the first listing pins everything).
    pub existed: bool,
    /// The pins.
    pub pins: Pins,
    /// Not saved: until when no question is asked, after the daemon
    /// refused one (its pending limit, a fault): a retry for every hidden
    /// tool at every listing would cost a request each, all refused.
    pub ask_after: Option<std::time::Instant>,
}

impl PinFile {
    /// Reads `path`; a missing file is an empty one seen for the first time.
    pub fn load(path: &Path) -> Result<PinFile, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(PinFile {
                path: path.to_owned(),
                existed: true,
                pins: serde_json::from_str(&text)
                    .map_err(|e| format!("cannot read the pin file {}: {e}", path.display()))?,
                ask_after: None,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PinFile {
                path: path.to_owned(),
                existed: false,
                pins: Pins::default(),
                ask_after: None,
            }),
            Err(e) => Err(format!("cannot read the pin file {}: {e}", path.display())),
        }
    }

    /// Writes the pins (to a temporary file renamed over the old one).
    pub fn save(&mut self) -> Result<(), String> {
        let fail =
            |e: std::io::Error| format!("cannot write the pin file {}: {e}", self.path.display());
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(&self.pins).unwrap_or_default();
        let mut f = std::fs::File::create(&tmp).map_err(fail)?;
        f.write_all(text.as_bytes()).map_err(fail)?;
        f.sync_all().map_err(fail)?;
        std::fs::rename(&tmp, &self.path).map_err(fail)?;
        self.existed = true;
        Ok(())
    }

    /// Whether `name` is pinned at `digest`.
    pub fn accepts(&self, name: &str, digest: &str) -> bool {
        self.pins.tools.get(name).is_some_and(|d| d == digest)
    }
}

/// The detail of the `mcp-pin` action for `tool` of `server`.
pub fn pin_detail(server: &str, tool: &str, digest: &str) -> String {
    format!("{server}/{tool} sha256:{digest}")
}

/// Whether a settled `mcp-pin` action was approved by a human (an
/// operator), not by a rule or a grant, as asked: an approver who edited
/// its detail (another digest) approved another definition, not this one.
pub fn approved_by_a_human(action: &Value) -> bool {
    let status = action.get("status").and_then(Value::as_str);
    let by = action
        .get("decided_by")
        .and_then(Value::as_str)
        .unwrap_or("");
    let edited = action.get("edited").and_then(Value::as_bool) == Some(true);
    status == Some("approved")
        && !edited
        && !by.is_empty()
        && by != "policy"
        && !by.starts_with("grant:")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;

    fn tool(desc: &str) -> Tool {
        let schema = json!({"type": "object"}).as_object().unwrap().clone();
        Tool::new("t", desc.to_owned(), Arc::new(schema))
    }

    #[test]
    fn a_changed_description_changes_the_digest() {
        assert_eq!(digest(&tool("a")), digest(&tool("a")));
        assert_ne!(digest(&tool("a")), digest(&tool("b")));
    }

    #[test]
    fn icons_and_meta_change_the_digest_when_present() {
        let plain = tool("a");
        // The digest a tool without either was pinned at before they
        // counted: its other fields, `null` where absent.
        let before = {
            let def = json!({"name": "t", "title": null, "description": "a",
                "inputSchema": {"type": "object"}, "outputSchema": null, "annotations": null});
            hex::encode(Sha256::digest(def.to_string().as_bytes()))
        };
        assert_eq!(digest(&plain), before);
        let mut meta = plain.clone();
        meta.meta = Some(serde_json::from_value(json!({"ui/template": "x"})).unwrap());
        let mut icons = plain.clone();
        icons.icons =
            Some(serde_json::from_value(json!([{"src": "https://e.test/i.png"}])).unwrap());
        let mut other_icon = plain.clone();
        other_icon.icons =
            Some(serde_json::from_value(json!([{"src": "https://e.test/j.png"}])).unwrap());
        let all = [&plain, &meta, &icons, &other_icon].map(digest);
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn only_a_human_approval_accepts() {
        let a = |status: &str, by: &str| json!({"status": status, "decided_by": by});
        assert!(approved_by_a_human(&a("approved", "op-key-1")));
        assert!(!approved_by_a_human(&a("approved", "policy")));
        assert!(!approved_by_a_human(&a("approved", "grant:g1")));
        assert!(!approved_by_a_human(&a("denied", "op")));
        assert!(!approved_by_a_human(&a("pending", "")));
        let edited = json!({"status": "approved", "decided_by": "op-key-1", "edited": true,
            "approved_detail": "fs/t sha256:00"});
        assert!(!approved_by_a_human(&edited));
    }

    #[test]
    fn pins_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/pins.json");
        let mut f = PinFile::load(&path).unwrap();
        assert!(!f.existed);
        f.pins.tools.insert("t".into(), "d".into());
        f.save().unwrap();
        let g = PinFile::load(&path).unwrap();
        assert!(g.existed && g.accepts("t", "d") && !g.accepts("t", "e"));
    }
}
