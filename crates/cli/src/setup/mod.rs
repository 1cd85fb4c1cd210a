//! `actiongate setup <runtime> [--project|--user] [--dry-run]`: from
//! nothing to a gated agent. Checks that a daemon answers (or writes a
//! systemd user unit or a launchd agent when asked with `--service`),
//! makes an agent key for the runtime with the admin key and gives a new
//! agent a profile (`readonly` unless told otherwise), stores the key in a
//! 0600 file, and merges the hook into the runtime's config without
//! touching its other entries. `--dry-run` changes nothing and prints the
//! diff of each file it would write.

pub mod config;
pub mod diff;
pub mod service;

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use reqwest::Method;
use serde_json::json;

use super::Exit;
use super::http::{Api, ClientError, Conn, path_segment};
use config::{HookCall, Runtime};
use service::Service;

/// Where `setup` reads the admin key without `--admin-key-file`: the
/// default data dir's (`--data-dir D` makes it `D/admin.key`).
pub const DEFAULT_ADMIN_KEY_FILE: &str = "data/admin.key";

/// Flags of `setup`.
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The agent runtime to gate.
    #[arg(value_enum)]
    pub runtime: Runtime,
    /// Write the project's config (under --dir).
    #[arg(long, conflicts_with = "user")]
    pub project: bool,
    /// Write the user's config (under $HOME; the default, except for Copilot CLI).
    #[arg(long)]
    pub user: bool,
    /// Change nothing; print what would be done and the diff of each file.
    #[arg(long)]
    pub dry_run: bool,
    /// The project's directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,
    /// Base URL of the daemon.
    #[arg(long, env = "ACTIONGATE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Admin key, to make the agent key (default: read --admin-key-file).
    #[arg(long, env = "ACTIONGATE_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,
    /// File holding the admin key (the daemon writes `<data-dir>/admin.key`).
    #[arg(long, default_value = DEFAULT_ADMIN_KEY_FILE, value_name = "FILE")]
    pub admin_key_file: PathBuf,
    /// The agent the key acts as (default: the runtime's name).
    #[arg(long)]
    pub agent: Option<String>,
    /// Profile given to a new agent: a preset name.
    #[arg(long, default_value = "readonly")]
    pub profile: String,
    /// Where the agent key is kept (default: ~/.config/actiongate/<agent>.key).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Seconds the hook waits for a human (the runtime's hook timeout is set 10 s above).
    #[arg(long, default_value_t = 110, value_name = "SECONDS")]
    pub wait: u64,
    /// Cursor: also gate file reads (`beforeReadFile`).
    #[arg(long)]
    pub guard_reads: bool,
    /// When no daemon answers: write a user service that runs it.
    #[arg(long, value_enum)]
    pub service: Option<Service>,
    /// The service's data directory (default: ~/.local/share/actiongate).
    #[arg(long, value_name = "DIR")]
    pub service_data_dir: Option<PathBuf>,
}

fn home() -> Result<PathBuf, String> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| "HOME is not set".to_owned())
}

/// Whether a daemon answers `/healthz` at `url`.
pub async fn daemon_up(url: &str) -> Result<(), String> {
    let conn = Conn {
        url: url.to_owned(),
        key: None,
    };
    let api = Api::with_timeouts(&conn, Duration::from_secs(2), Duration::from_secs(3))
        .map_err(|e| e.to_string())?;
    api.get("/healthz")
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The current text of a config file: empty when there is none, an error
/// when it exists but cannot be read as text (merging into "nothing" would
/// write the hook alone over the user's settings).
fn read_current(path: &Path) -> Result<String, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(format!(
            "cannot read {} ({e}); fix it first, nothing was changed",
            path.display()
        )),
    }
}

/// Writes `text` to `path` (parents created), or prints the diff. The write
/// is atomic (a fresh temporary file, synced, renamed over the old one); an
/// existing file keeps its permissions (a settings file may hold secrets)
/// and a symbolic link stays a link, its target rewritten; a new file gets
/// `mode`.
fn write_or_show(path: &Path, text: &str, dry_run: bool, mode: u32) -> Result<bool, String> {
    let current = read_current(path)?;
    if current == text {
        println!("{}: up to date", path.display());
        return Ok(false);
    }
    if dry_run {
        print!(
            "{}",
            diff::diff(&path.display().to_string(), &current, text)
        );
        return Ok(true);
    }
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let target = if is_link {
        std::fs::canonicalize(path)
            .map_err(|e| format!("cannot follow the link {}: {e}", path.display()))?
    } else {
        path.to_path_buf()
    };
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let mode = match std::fs::metadata(&target) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(_) => mode,
    };
    let tmp = target.with_extension("actiongate-tmp");
    // A file left by an interrupted run may have any permissions: start anew.
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", tmp.display())),
    }
    let written = (|| -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // Exactly the mode, whatever the umask took away.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", tmp.display()));
    }
    std::fs::rename(&tmp, &target)
        .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
    println!("wrote {}", path.display());
    Ok(true)
}

/// `setup`.
pub async fn run(a: SetupArgs) -> Exit {
    match setup(a).await {
        Ok(exit) => exit,
        Err(e) => {
            eprintln!("actiongate setup: {e}");
            Exit::Usage
        }
    }
}

async fn setup(a: SetupArgs) -> Result<Exit, String> {
    let home = home()?;
    let rt = a.runtime;
    let user = a.user || (!a.project && rt != Runtime::Copilot);
    let agent = a.agent.clone().unwrap_or_else(|| rt.name().to_owned());
    let key_file = a
        .key_file
        .clone()
        .unwrap_or_else(|| home.join(format!(".config/actiongate/{agent}.key")));
    let exe = std::env::current_exe().map_err(|e| format!("cannot find actiongate: {e}"))?;
    // Where the hook goes, and that it can go there, known before anything
    // is made: a runtime without a user config (Copilot CLI) refuses
    // `--user` here, and a config the hook cannot be merged into (not
    // JSON, comments in it) is refused, not after making an agent and its
    // key.
    merged_config(
        &a,
        rt,
        &rt.config_path(user, &home, &a.dir)?,
        &exe,
        &key_file,
    )?;

    // 1. The daemon.
    if let Err(e) = daemon_up(&a.url).await {
        println!("no daemon answers at {}: {e}", a.url);
        let Some(service) = a.service else {
            if !a.dry_run {
                eprintln!(
                    "actiongate setup: start one (`actiongate serve`, or pass --url if it \
                     listens elsewhere) or pass --service systemd|launchd; then run setup again"
                );
                return Ok(Exit::Unreachable);
            }
            return finish_config(&a, rt, user, &home, &exe, &key_file).map(|_| Exit::Unreachable);
        };
        let listen = a
            .url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let data = service_data_dir_abs(&a, &home);
        let (path, text, start) = service::unit(service, &home, &exe, &data, &listen);
        write_or_show(&path, &text, a.dry_run, 0o644)?;
        println!("start it with: {start}");
        // The real run stops here, and so does its dry run: nothing else
        // is written before the daemon answers.
        println!(
            "then run this setup again{} to make the key and write the hook (the admin key is {})",
            if a.dry_run { " without --dry-run" } else { "" },
            data.join("admin.key").display()
        );
        println!(
            "note: this daemon runs as you, and so do your agents: their tools can read its admin \
             key; where they run unattended, run the daemon as a user of its own \
             (docs/security.md)"
        );
        return Ok(Exit::Unreachable);
    } else {
        println!("daemon: {} answers", a.url);
        // 2. The agent key.
        make_key(&a, &agent, &key_file).await?;
    }
    // 3. The runtime's config.
    finish_config(&a, rt, user, &home, &exe, &key_file)?;
    Ok(Exit::Ok)
}

fn finish_config(
    a: &SetupArgs,
    rt: Runtime,
    user: bool,
    home: &Path,
    exe: &Path,
    key_file: &Path,
) -> Result<(), String> {
    let path = rt.config_path(user, home, &a.dir)?;
    let text = merged_config(a, rt, &path, exe, key_file)?;
    write_or_show(&path, &text, a.dry_run, 0o644)?;
    Ok(())
}

/// The runtime's config at `path` with the hook merged in, or why it
/// cannot take it.
fn merged_config(
    a: &SetupArgs,
    rt: Runtime,
    path: &Path,
    exe: &Path,
    key_file: &Path,
) -> Result<String, String> {
    let call = HookCall {
        exe: exe.display().to_string(),
        url: a.url.clone(),
        key_file: key_file.display().to_string(),
        wait: a.wait,
        guard_reads: a.guard_reads,
    };
    config::merged(rt, &read_current(path)?, &call).map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether the key in `key_file` is a live key of `agent`, as the daemon
/// says: a revoked or garbled one is replaced (`false`); another agent's
/// or role's is an error, as the file was put there on purpose.
async fn existing_key_usable(a: &SetupArgs, agent: &str, key_file: &Path) -> Result<bool, String> {
    let key = std::fs::read_to_string(key_file)
        .map_err(|e| format!("cannot read {}: {e}", key_file.display()))?;
    let api = Api::new(&Conn {
        url: a.url.clone(),
        key: Some(key.trim().to_owned()),
    })
    .map_err(|e| e.to_string())?;
    match api.get("/v1/whoami").await {
        Ok(who) if who.get("agent").and_then(|v| v.as_str()) == Some(agent) => Ok(true),
        Ok(who) => Err(format!(
            "{} holds a key of {}, not of agent `{agent}`: delete it, or pass --key-file",
            key_file.display(),
            who.get("agent")
                .and_then(|v| v.as_str())
                .map_or_else(|| "no agent".to_owned(), |x| format!("agent `{x}`"))
        )),
        Err(ClientError::Api(p)) if p.status == 401 => {
            println!(
                "agent key: the daemon refuses the key in {} (revoked, or not a key); it is replaced",
                key_file.display()
            );
            Ok(false)
        }
        Err(e) => Err(format!(
            "cannot check the key in {}: {e}",
            key_file.display()
        )),
    }
}

/// The admin key: given, or read from `--admin-key-file` (the daemon's
/// `data/admin.key` unless told otherwise); when that default is missing,
/// from the data dir of the service `--service` writes, so the second run
/// the first one asks for finds it.
fn admin_key(a: &SetupArgs) -> Result<String, String> {
    if let Some(k) = a.admin_key.as_deref().filter(|k| !k.trim().is_empty()) {
        return Ok(k.trim().to_owned());
    }
    let read = |f: &Path| std::fs::read_to_string(f).map(|s| s.trim().to_owned());
    let first = match read(&a.admin_key_file) {
        Ok(k) => return Ok(k),
        Err(e) => e,
    };
    // Only for a daemon on this machine: the service's key is never sent
    // to another host's --url.
    if a.admin_key_file == Path::new(DEFAULT_ADMIN_KEY_FILE)
        && on_loopback(&a.url)
        && let Ok(k) = read(&service_data_dir(a, &home()?).join("admin.key"))
    {
        return Ok(k);
    }
    Err(format!(
        "an admin key is needed to make the agent key: pass --admin-key, \
         ACTIONGATE_ADMIN_KEY, --admin-key-file or the daemon's --data-dir \
         (cannot read {}: {first})",
        a.admin_key_file.display()
    ))
}

/// Whether `url` names this machine (`127.0.0.1`, `[::1]`, `localhost`).
fn on_loopback(url: &str) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    match u
        .host_str()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
    {
        Some(h) if h.eq_ignore_ascii_case("localhost") => true,
        Some(h) => h
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// Where the service `--service` writes keeps its data (absolute: the
/// service runs elsewhere than here).
fn service_data_dir_abs(a: &SetupArgs, home: &Path) -> PathBuf {
    let dir = service_data_dir(a, home);
    std::path::absolute(&dir).unwrap_or(dir)
}

/// Where the service `--service` writes keeps its data.
fn service_data_dir(a: &SetupArgs, home: &Path) -> PathBuf {
    a.service_data_dir
        .clone()
        .unwrap_or_else(|| home.join(".local/share/actiongate"))
}

async fn make_key(a: &SetupArgs, agent: &str, key_file: &Path) -> Result<(), String> {
    if key_file.exists() && existing_key_usable(a, agent, key_file).await? {
        println!("agent key: using {}", key_file.display());
        return only_yours(key_file, a.dry_run);
    }
    // Read first, dry run or not: a dry run fails as the real one would.
    let admin = admin_key(a)?;
    if a.dry_run {
        println!(
            "agent key: would make one for agent `{agent}` (profile `{}` if the agent is new) and store it in {}",
            a.profile,
            key_file.display()
        );
        return Ok(());
    }
    let api = Api::new(&Conn {
        url: a.url.clone(),
        key: Some(admin),
    })
    .map_err(|e| e.to_string())?;
    let agent_path = format!("/v1/agents/{}", path_segment(agent));
    match api.get(&agent_path).await {
        Ok(_) => println!("agent `{agent}`: exists; its profile is left as it is"),
        Err(ClientError::Api(p)) if p.status == 404 => {
            api.call(
                Method::PUT,
                &agent_path,
                Some(&json!({"profile": a.profile})),
                Duration::ZERO,
            )
            .await
            .map_err(|e| format!("cannot give agent `{agent}` its profile: {e}"))?;
            println!("agent `{agent}`: profile `{}`", a.profile);
        }
        Err(e) => return Err(format!("cannot read agent `{agent}`: {e}")),
    }
    let created = api
        .post(
            "/v1/keys",
            &json!({"role": "agent", "agent": agent, "name": format!("actiongate setup {}", a.runtime.name())}),
        )
        .await
        .map_err(|e| format!("cannot make the agent key: {e}"))?;
    let key = created
        .get("key")
        .and_then(|k| k.as_str())
        .ok_or("the daemon's answer has no key")?;
    if let Some(parent) = key_file.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700));
    }
    write_or_show(key_file, &format!("{key}\n"), false, 0o600)?;
    only_yours(key_file, false)
}

/// Makes the key file its owner's alone (0600) when others may read it (a
/// file made by hand, or kept from before): a key any user could read is
/// any user's. A dry run says it would.
fn only_yours(key_file: &Path, dry_run: bool) -> Result<(), String> {
    let mode = std::fs::metadata(key_file)
        .map_err(|e| format!("cannot read {}: {e}", key_file.display()))?
        .permissions()
        .mode();
    if mode & 0o077 == 0 {
        return Ok(());
    }
    if dry_run {
        println!(
            "agent key: would make {} 0600 (it is {:o})",
            key_file.display(),
            mode & 0o777
        );
        return Ok(());
    }
    std::fs::set_permissions(key_file, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot make {} 0600: {e}", key_file.display()))?;
    println!(
        "agent key: {} was readable by others ({:o}); it is 0600 now",
        key_file.display(),
        mode & 0o777
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::on_loopback;

    /// The service's admin key is only ever sent to this machine.
    #[test]
    fn only_this_machine_is_on_loopback() {
        for url in [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "http://[::1]:8080",
            "http://127.8.0.1",
        ] {
            assert!(on_loopback(url), "{url}");
        }
        for url in [
            "http://10.0.0.2:8080",
            "https://gate.example.com",
            "http://localhost.example.com",
            "not a url",
        ] {
            assert!(!on_loopback(url), "{url}");
        }
    }
}
