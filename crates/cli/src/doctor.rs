//! `actiongate doctor`: checks the daemon, then each runtime's user and
//! project config: is actiongate's hook there, is its key file readable,
//! and does the daemon take that key as an agent key (`POST /v1/check`,
//! which stores nothing). Says what to fix; exits 1 when anything is wrong.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::Exit;
use super::http::{Api, ClientError, Conn};
use super::setup::config::{Runtime, fails_closed, installed, unasked_tools};
use super::setup::daemon_up;

/// Flags of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Base URL of the daemon.
    #[arg(long, env = "ACTIONGATE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The project's directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,
}

/// The value after `--key-file` in a hook command line (as `setup` writes
/// it: single-quoted, or a bare word), or in the opencode plugin's JSON
/// arguments (`"--key-file", "/…/opencode.key"`).
pub fn key_file_of(text: &str) -> Option<String> {
    if let Some(rest) = text.split("\"--key-file\"").nth(1) {
        let rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        return serde_json::Deserializer::from_str(rest)
            .into_iter::<String>()
            .next()?
            .ok();
    }
    let rest = text.split("--key-file ").nth(1)?;
    if let Some(q) = rest.strip_prefix('\'') {
        let mut out = String::new();
        let mut s = q;
        loop {
            let end = s.find('\'')?;
            out.push_str(&s[..end]);
            s = &s[end + 1..];
            // `'\''` is a quote inside the quoted word.
            if let Some(more) = s.strip_prefix("\\''") {
                out.push('\'');
                s = more;
            } else {
                return Some(out);
            }
        }
    }
    rest.split(|c: char| c.is_whitespace() || c == '"')
        .next()
        .map(str::to_owned)
}

/// Whether the key file is its owner's alone: a key other users can read
/// is theirs too.
fn private(key_file: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(key_file)
        .map_err(|e| format!("cannot read the key file {}: {e}", key_file.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "the key file {} is readable by other users ({:o}): run `chmod 600 {}`",
            key_file.display(),
            mode & 0o777,
            key_file.display()
        ));
    }
    Ok(())
}

async fn check_key(url: &str, key_file: &Path) -> Result<(), String> {
    let key = std::fs::read_to_string(key_file)
        .map_err(|e| format!("cannot read the key file {}: {e}", key_file.display()))?;
    let api = Api::with_timeouts(
        &Conn {
            url: url.to_owned(),
            key: Some(key.trim().to_owned()),
        },
        Duration::from_secs(2),
        Duration::from_secs(5),
    )
    .map_err(|e| e.to_string())?;
    match api
        .post(
            "/v1/check",
            &json!({"tool": "actiongate", "detail": "doctor"}),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(ClientError::Api(p)) if p.status == 401 => Err(format!(
            "the daemon does not know the key in {} (revoked?): run `actiongate setup` again: it replaces the key",
            key_file.display()
        )),
        Err(ClientError::Api(p)) if p.status == 403 => Err(format!(
            "the key in {} is not an agent key",
            key_file.display()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// `doctor`.
pub async fn run(a: DoctorArgs) -> Exit {
    let mut problems = 0;
    let up = match daemon_up(&a.url).await {
        Ok(()) => {
            println!("ok    daemon answers at {}", a.url);
            true
        }
        Err(e) => {
            println!(
                "FIX   no daemon at {}: {e}; start `actiongate serve` or run `actiongate setup <runtime> --service systemd|launchd`",
                a.url
            );
            problems += 1;
            false
        }
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut found = 0;
    for rt in Runtime::ALL {
        // The hooks of this runtime in its user and project configs.
        let mut hooks: Vec<(PathBuf, Option<String>)> = Vec::new();
        for user in [true, false] {
            let Some(home) = &home else { continue };
            let Ok(path) = rt.config_path(user, home, &a.dir) else {
                continue;
            };
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            found += 1;
            if installed(rt, &text) {
                hooks.push((path.clone(), key_file_of(&text)));
            }
            if !installed(rt, &text) {
                println!(
                    "FIX   {}: no actiongate hook for {}; run `actiongate setup {} {}`",
                    path.display(),
                    rt.name(),
                    rt.name(),
                    if user { "--user" } else { "--project" }
                );
                problems += 1;
                continue;
            }
            if !fails_closed(rt, &text) {
                println!(
                    "FIX   {}: the actiongate hook for {} does not refuse when it cannot answer (no `|| exit 2`, or Cursor's `failClosed` off: a moved or crashed hook lets the call run); run `actiongate setup {} {}` again",
                    path.display(),
                    rt.name(),
                    rt.name(),
                    if user { "--user" } else { "--project" }
                );
                problems += 1;
            }
            let unasked = unasked_tools(rt, &text);
            if !unasked.is_empty() {
                println!(
                    "FIX   {}: the actiongate hook for {} does not ask about {} (an older setup wrote it: those calls run unasked); run `actiongate setup {} {}` again",
                    path.display(),
                    rt.name(),
                    unasked.join(", "),
                    rt.name(),
                    if user { "--user" } else { "--project" }
                );
                problems += 1;
            }
            let Some(key_file) = key_file_of(&text) else {
                println!(
                    "ok    {}: actiongate hook for {} (its key comes from the environment)",
                    path.display(),
                    rt.name()
                );
                continue;
            };
            let verdict = if up {
                check_key(&a.url, Path::new(&key_file)).await
            } else {
                std::fs::metadata(&key_file)
                    .map(|_| ())
                    .map_err(|e| format!("cannot read the key file {key_file}: {e}"))
            }
            .and_then(|()| private(Path::new(&key_file)));
            match verdict {
                Ok(()) => println!(
                    "ok    {}: actiongate hook for {}, key {key_file}",
                    path.display(),
                    rt.name()
                ),
                Err(e) => {
                    println!("FIX   {}: {e}", path.display());
                    problems += 1;
                }
            }
        }
        // Two hooks of one runtime for two agents both run: each call is
        // asked as both, and each run reported twice (the second a false
        // `action.undecided`).
        if let [(a, ka), (b, kb)] = hooks.as_slice()
            && ka != kb
        {
            println!(
                "FIX   {} and {} both install an actiongate hook for {} with other keys: it runs both; keep one",
                a.display(),
                b.display(),
                rt.name()
            );
            problems += 1;
        }
    }
    if found == 0 {
        println!("FIX   no runtime config found; run `actiongate setup <runtime>`");
        problems += 1;
    }
    if problems == 0 {
        Exit::Ok
    } else {
        println!("{problems} thing(s) to fix");
        Exit::Denied
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_key_file_is_read_back_from_the_command() {
        assert_eq!(
            key_file_of("'x' hook gemini --key-file '/h/it'\\''s.key' --wait 5").as_deref(),
            Some("/h/it's.key")
        );
        assert_eq!(
            key_file_of("actiongate hook codex --key-file /k/a.key --wait 5").as_deref(),
            Some("/k/a.key")
        );
        assert_eq!(key_file_of("actiongate hook codex"), None);
        // The opencode plugin setup writes: its arguments as JSON.
        let plugin = r#"const CONFIG = {"bin":"/b/actiongate","args":["--url","http://x","--key-file","/h/o\"pen.key"],"wait":110};"#;
        assert_eq!(key_file_of(plugin).as_deref(), Some("/h/o\"pen.key"));
        // As setup renders it.
        let call = crate::setup::config::HookCall {
            exe: "/b/actiongate".into(),
            url: "http://127.0.0.1:8080".into(),
            key_file: "/home/u/.config/actiongate/opencode.key".into(),
            wait: 110,
            guard_reads: false,
        };
        let text = crate::setup::config::merged(crate::setup::config::Runtime::Opencode, "", &call)
            .unwrap();
        assert_eq!(
            key_file_of(&text).as_deref(),
            Some("/home/u/.config/actiongate/opencode.key"),
            "{text}"
        );
    }
}
