//! The handler registration this executor sends to the daemon
//! (`POST /v1/handlers`, or `PUT /v1/handlers/{id}` if it exists), and
//! keeping the returned secret in `<state-dir>/secret` (mode 0600).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::atomic::{self, Replace};

/// The default handler id.
pub const HANDLER_ID: &str = "fs";

/// The file the secret is kept in, inside the state dir.
pub fn secret_path(state_dir: &Path) -> PathBuf {
    state_dir.join("secret")
}

fn scope_schema(key: &str, what: &str) -> Value {
    json!({
        "type": "object",
        "properties": {key: {"type": "string", "description": what}},
        "additionalProperties": false
    })
}

fn file_params(with_content: bool) -> Value {
    let mut props = json!({
        "filepath": {"type": "string", "minLength": 1, "description": "Path of the file, relative to the executor's root (or absolute inside it)"},
        "reason": {"type": "string", "description": "Why this action accomplishes the user's request"}
    });
    let mut required = vec!["filepath"];
    if with_content {
        props["content"] =
            json!({"type": "string", "description": "The whole new content of the file"});
        required.push("content");
    }
    required.push("reason");
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// The registration JSON for `handler_id` with webhook `url`; the daemon's
/// per-attempt `timeout` leaves room for a command's own timeout.
pub fn registration(handler_id: &str, url: &str, command_timeout: Duration) -> Value {
    let timeout = format!("{}s", command_timeout.as_secs().saturating_add(15));
    json!({
        "id": handler_id,
        "name": "Files and shell commands",
        "description": "Reference actiongate executor: creates, updates and reads files under its root and runs shell commands there (seed 002).",
        "url": url,
        "timeout": timeout,
        "permissions": [
            {"name": "fs.write", "description": "Create or change files under the executor's root", "parameters_schema": scope_schema("path", "File path as the agent sent it")},
            {"name": "fs.read", "description": "Read files under the executor's root", "parameters_schema": scope_schema("path", "File path as the agent sent it")},
            {"name": "shell.exec", "description": "Run shell commands in the executor's root", "parameters_schema": scope_schema("command", "The command line")}
        ],
        "actions": [
            {
                "name": "create_file",
                "description": "Create a new file with the given content (refused if it exists). Missing directories are created.",
                "params_schema": file_params(true),
                "permission": "fs.write",
                "scope": {"path": "/filepath"},
                "detail": "create_file {filepath}",
                "hints": {"read_only": false, "destructive": false, "idempotent": false, "open_world": false},
                "render": {"title": "Create {filepath}", "summary": "{reason}", "fields": [{"label": "Content", "value": "{content}"}]}
            },
            {
                "name": "update_file",
                "description": "Replace an existing file's content; the previous version is kept as <file>.bak.",
                "params_schema": file_params(true),
                "permission": "fs.write",
                "scope": {"path": "/filepath"},
                "detail": "update_file {filepath}",
                "hints": {"read_only": false, "destructive": true, "idempotent": true, "open_world": false},
                "render": {"title": "Overwrite {filepath}", "summary": "{reason}", "fields": [{"label": "New content", "value": "{content}"}]}
            },
            {
                "name": "update_readme",
                "description": "Append a dated entry (the reason) to the '## Auto-update log' section of the README (default README.md).",
                "params_schema": {
                    "type": "object",
                    "properties": {
                        "reason": {"type": "string", "minLength": 1, "description": "The log entry: what changed and why"},
                        "filepath": {"type": "string", "minLength": 1, "description": "The README to append to (default README.md)"}
                    },
                    "required": ["reason"],
                    "additionalProperties": false
                },
                "permission": "fs.write",
                "scope": {"path": "/filepath"},
                "detail": "update_readme {filepath}",
                "hints": {"read_only": false, "destructive": false, "idempotent": false, "open_world": false},
                "render": {"title": "Log an update in {filepath}", "summary": "{reason}"}
            },
            {
                "name": "read_file",
                "description": "Read a file's text.",
                "params_schema": file_params(false),
                "permission": "fs.read",
                "scope": {"path": "/filepath"},
                "detail": "read_file {filepath}",
                "hints": {"read_only": true, "open_world": false},
                "render": {"title": "Read {filepath}", "summary": "{reason}"}
            },
            {
                "name": "execute_command",
                "description": "Run a shell command in the executor's root, with a timeout; returns exit code, stdout and stderr.",
                "params_schema": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1, "description": "The command line"},
                        "filepath": {"type": "string", "enum": ["bash", "sh"], "description": "Accepted for compatibility: the line always runs in bash (the shell the policy analysed it as); `sh` runs `bash --posix`"},
                        "reason": {"type": "string", "description": "Why this action accomplishes the user's request"}
                    },
                    "required": ["content", "reason"],
                    "additionalProperties": false
                },
                "permission": "shell.exec",
                "scope": {"command": "/content"},
                "detail": "execute_command {content}",
                "hints": {"read_only": false, "destructive": true, "idempotent": false, "open_world": true},
                "render": {"title": "Run a command", "summary": "{reason}", "fields": [{"label": "Command", "value": "{content}"}, {"label": "Shell", "value": "{filepath}"}]}
            }
        ]
    })
}

/// Why registering failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The daemon could not be reached.
    #[error("cannot reach the daemon: {0}")]
    Http(#[from] reqwest::Error),
    /// The daemon refused the registration.
    #[error("the daemon answered {0} to {1}: {2}")]
    Refused(u16, &'static str, String),
    /// The daemon's answer has no secret.
    #[error("the daemon's answer has no secret")]
    NoSecret,
    /// The handler existed and no secret is known for it.
    #[error(
        "handler '{0}' was already registered and its secret is unknown here: pass --secret (or ACTIONGATE_EXECUTOR_SECRET), or retire the handler and register again"
    )]
    UnknownSecret(String),
    /// The secret cannot be saved.
    #[error("cannot save the secret to {0}: {1}")]
    Save(PathBuf, std::io::Error),
}

/// Registers (or re-registers) the handler with the daemon at `daemon`.
/// Returns the secret: the new one (saved to `<state_dir>/secret`), or for an
/// existing handler `known_secret` or the saved one.
pub async fn register(
    daemon: &str,
    admin_key: &str,
    reg: &Value,
    state_dir: &Path,
    known_secret: Option<&str>,
) -> Result<String, RegisterError> {
    let base = daemon.trim_end_matches('/');
    crate::install_tls_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let resp = client
        .post(format!("{base}/v1/handlers"))
        .bearer_auth(admin_key)
        .json(reg)
        .send()
        .await?;
    let code = resp.status().as_u16();
    if code == 201 {
        let body: Value = resp.json().await?;
        let secret = body
            .get("secret")
            .and_then(Value::as_str)
            .ok_or(RegisterError::NoSecret)?
            .to_owned();
        save_secret(state_dir, &secret)?;
        return Ok(secret);
    }
    if code != 409 {
        return Err(RegisterError::Refused(
            code,
            "POST /v1/handlers",
            resp.text().await.unwrap_or_default(),
        ));
    }
    let id = reg.get("id").and_then(Value::as_str).unwrap_or(HANDLER_ID);
    let secret = match known_secret {
        Some(s) => s.to_owned(),
        None => std::fs::read_to_string(secret_path(state_dir))
            .map(|s| s.trim().to_owned())
            .map_err(|_| RegisterError::UnknownSecret(id.to_owned()))?,
    };
    let resp = client
        .put(format!("{base}/v1/handlers/{id}"))
        .bearer_auth(admin_key)
        .json(reg)
        .send()
        .await?;
    let code = resp.status().as_u16();
    if code != 200 {
        return Err(RegisterError::Refused(
            code,
            "PUT /v1/handlers/{id}",
            resp.text().await.unwrap_or_default(),
        ));
    }
    Ok(secret)
}

/// Saves the secret as `<state_dir>/secret`, mode 0600, atomically.
pub fn save_secret(state_dir: &Path, secret: &str) -> Result<(), RegisterError> {
    let path = secret_path(state_dir);
    std::fs::create_dir_all(state_dir).map_err(|e| RegisterError::Save(path.clone(), e))?;
    atomic::write(&path, format!("{secret}\n").as_bytes(), 0o600, Replace::Yes)
        .map_err(|e| RegisterError::Save(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_is_declared_with_a_strict_schema_and_a_declared_permission() {
        let reg = registration(
            HANDLER_ID,
            "http://127.0.0.1:8090/",
            Duration::from_secs(30),
        );
        assert_eq!(reg["timeout"], "45s");
        let perms: Vec<&str> = reg["permissions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str())
            .collect();
        let actions = reg["actions"].as_array().cloned().unwrap_or_default();
        let names: Vec<&str> = actions.iter().filter_map(|a| a["name"].as_str()).collect();
        assert_eq!(names, crate::actions::ACTIONS);
        for a in &actions {
            assert_eq!(a["params_schema"]["additionalProperties"], false);
            assert!(a["params_schema"]["required"].as_array().is_some());
            assert!(perms.contains(&a["permission"].as_str().unwrap_or("")));
        }
    }
}
