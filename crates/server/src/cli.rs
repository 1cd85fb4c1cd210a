//! The `actiongate` command line: the daemon and the commands that work
//! directly on its data dir.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use actiongate_gate::Role;
use actiongate_gate::storage::{self, AuditKey};

use crate::config::{FlagOverrides, LogFormat, Settings};

/// actiongate: gates what AI agents do.
#[derive(Debug, Parser)]
#[command(name = "actiongate", version, about)]
pub struct Cli {
    /// The daemon's config file (default: config/actiongate.toml when it
    /// exists); for serve, keys, migrate, audit and backup only: the other
    /// commands talk to a daemon at --url.
    #[arg(long, global = true, env = "ACTIONGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory holding the database (default ./data); for serve,
    /// keys, migrate, audit, backup and setup only.
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// Keep everything in this Postgres database instead of the SQLite
    /// file in the data dir (`postgres://user:password@host:port/db`;
    /// setting `storage.database_url`). Daemons given the same URL act as
    /// one gate. For serve, keys, migrate, audit and backup only.
    #[arg(long, global = true, value_name = "URL")]
    pub database_url: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon.
    Serve(ServeArgs),
    /// Apply database migrations and exit.
    Migrate {
        /// Postgres: migrate although other clients than daemons of this
        /// version are connected to the database; only when you know none
        /// is an older actiongate (docs/operations.md).
        #[arg(long)]
        beside_other_clients: bool,
    },
    /// Manage API keys in the data dir.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Print the OpenAPI document.
    Openapi,
    /// Export or verify the tamper-evident audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Copy the data dir (its SQLite database and key files) to a new
    /// directory while the daemon runs; a daemon started there has
    /// everything as it was (docs/operations.md).
    Backup {
        /// The directory to make for the copy (must not exist).
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
    },
    /// Commands that talk to a running daemon (see `actiongate_cli`).
    #[command(flatten)]
    Client(actiongate_cli::ClientCommand),
}

/// `audit` subcommands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Write the hash-chained event log (JSON lines) from the data dir.
    Export {
        /// Start at the first event written at or after this time (RFC 3339).
        #[arg(long)]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// Stop before the first event written at or after this time (RFC 3339).
        #[arg(long)]
        until: Option<chrono::DateTime<chrono::Utc>>,
        /// Write here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check an export strictly; names the first bad line and exits
    /// non-zero. See docs/audit.md for what it proves.
    Verify {
        /// The export (JSON lines).
        file: PathBuf,
        /// Where the export's chain starts when not at genesis, as
        /// `SEQ:HASH`: the end of the previous export (printed by its
        /// verification) or the retention anchor.
        #[arg(
            long = "from-anchor",
            visible_alias = "anchor",
            value_name = "SEQ:HASH"
        )]
        from_anchor: Option<String>,
        /// The daemon's audit key (`<data-dir>/audit.key`): every anchor
        /// and the final line must be signed with it.
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
}

/// Flags of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// Log format.
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
}

/// `keys` subcommands.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Issue a key and print it (shown only now).
    Create {
        /// agent, operator or admin.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// The agent the key acts as (required for agent keys).
        #[arg(long)]
        agent: Option<String>,
        /// A name to recognise the key by.
        #[arg(long)]
        name: Option<String>,
        /// Print JSON instead of the bare key.
        #[arg(long)]
        json: bool,
    },
    /// List keys (never their secrets).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by id.
    Revoke {
        /// Key id (`key_…`).
        id: String,
    },
}

fn parse_role(s: &str) -> Result<Role, String> {
    s.parse()
}

/// Whether the text log is coloured: only on a terminal, and not when
/// `NO_COLOR` is set to anything but the empty string (no-color.org), so
/// a log redirected to a file or a pipe holds no escape codes.
pub fn log_colours(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

fn init_logging(settings: &Settings) {
    let mut filter = tracing_subscriber::EnvFilter::try_from_env("ACTIONGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&settings.log_level));
    // The MCP library logs each session's every step at info (four lines a
    // session, soak review): its warnings only, unless the filter names it.
    let named = std::env::var("ACTIONGATE_LOG").unwrap_or_default() + &settings.log_level;
    if !named.contains("rmcp")
        && let Ok(quiet) = "rmcp=warn".parse()
    {
        filter = filter.add_directive(quiet);
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(log_colours(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR"),
        ))
        .with_writer(crate::log_sink::Stderr)
        // Its report of a failed write goes to stderr with `eprintln!`,
        // which panics when stderr fails: the writer counts them instead.
        .log_internal_errors(false);
    let _ = match settings.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// A reader that stops reading (`actiongate pending | head -1`) ends the
/// command the way a closed pipe ends any Unix tool, quietly with 141,
/// instead of with the panic and backtrace `println!` raises (Rust ignores
/// SIGPIPE, so the write fails instead); another failure to write there
/// (a full disk) is one line and exit 1.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(why) = text.strip_prefix("failed printing to stdout: ") {
            if why.starts_with("Broken pipe") {
                std::process::exit(141);
            }
            crate::log_sink::line(&format!(
                "actiongate: cannot write to standard output: {why}"
            ));
            std::process::exit(1);
        }
        default(info);
    }));
}

/// Runs the command line; the process exit code.
pub fn main() -> std::process::ExitCode {
    quiet_on_closed_stdout();
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Given on the command line (not from ACTIONGATE_CONFIG, which a
    // shell may export for the daemon): a client command would ignore it.
    let config_flag = matches!(
        matches.value_source("config"),
        Some(clap::parser::ValueSource::CommandLine)
    );
    // As many runtime workers as CPUs, counted before `serve_settings` may
    // take one for the writer: it moves the threads, not their number.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // `serve` reads its settings before the runtime starts its threads: with
    // `storage.writer_cpu` they start off the writer's CPU.
    let serve = match &cli.command {
        Command::Serve(_) => match serve_settings(&cli) {
            Ok(settings) => Some(settings),
            Err(e) => {
                crate::log_sink::line(&format!("actiongate: {e:#}"));
                return std::process::ExitCode::from(1);
            }
        },
        _ => None,
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if serve
        .as_ref()
        .is_some_and(|s| s.storage.writer_cpu.is_some())
    {
        builder.worker_threads(cpus);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            crate::log_sink::line(&format!("actiongate: cannot start the runtime: {e}"));
            return std::process::ExitCode::from(1);
        }
    };
    let cli = match cli.command {
        // `setup` reads the admin key from the data dir `--data-dir` names,
        // unless told another file.
        Command::Client(actiongate_cli::ClientCommand::Setup(mut a)) => {
            if config_flag || cli.database_url.is_some() {
                crate::log_sink::line(
                    "actiongate: --config and --database-url are for the daemon's commands \
                     (serve, keys, migrate, audit, backup); setup takes --url and --data-dir",
                );
                return std::process::ExitCode::from(2);
            }
            if let Some(dir) = &cli.data_dir
                && a.admin_key_file
                    == std::path::Path::new(actiongate_cli::setup::DEFAULT_ADMIN_KEY_FILE)
            {
                a.admin_key_file = dir.join("admin.key");
            }
            // The service `--service` writes runs on the data dir named,
            // absolute: a unit's working directory is not this one.
            if a.service_data_dir.is_none() {
                a.service_data_dir = cli
                    .data_dir
                    .as_deref()
                    .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.to_owned()));
            }
            let cmd = actiongate_cli::ClientCommand::Setup(a);
            return runtime.block_on(actiongate_cli::run(cmd));
        }
        Command::Client(cmd) => {
            // The daemon's storage flags do nothing here: say so rather
            // than let a command seem to act on another data dir or
            // database (it talks to the daemon at --url).
            if cli.data_dir.is_some() || cli.database_url.is_some() || config_flag {
                crate::log_sink::line(
                    "actiongate: --config, --data-dir and --database-url are for the daemon's \
                     commands (serve, keys, migrate, audit, backup; setup takes --data-dir); this command \
                     talks to the daemon at --url",
                );
                return std::process::ExitCode::from(2);
            }
            return runtime.block_on(actiongate_cli::run(cmd));
        }
        command => Cli { command, ..cli },
    };
    let done = match serve {
        Some(settings) => runtime.block_on(serve_daemon(settings)),
        None => runtime.block_on(run(cli)),
    };
    match done {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if closed_pipe(&e) => std::process::ExitCode::from(141),
        Err(e) => {
            crate::log_sink::line(&format!("actiongate: {e:#}"));
            std::process::ExitCode::from(1)
        }
    }
}

/// Whether `e` is a write to a pipe its reader closed (`audit export |
/// head`), which ends the command quietly, as [`quiet_on_closed_stdout`].
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The settings given by flags.
fn flag_overrides(cli: &Cli) -> FlagOverrides {
    let mut flags = FlagOverrides {
        data_dir: cli.data_dir.clone(),
        storage: cli
            .database_url
            .clone()
            .map(|database_url| crate::config::StorageFlags { database_url }),
        ..FlagOverrides::default()
    };
    if let Command::Serve(args) = &cli.command {
        flags.listen = args.listen;
        flags.log_format = args.log_format;
    }
    flags
}

/// `serve`'s settings. With `storage.writer_cpu`, this thread (which starts
/// every other, and they inherit it) is kept off the writer's CPU.
fn serve_settings(cli: &Cli) -> anyhow::Result<Settings> {
    let settings = Settings::load(cli.config.as_deref(), &flag_overrides(cli))?;
    if let Some(cpu) = settings.storage.writer_cpu {
        storage::cpus::keep_off(cpu)
            .map_err(|e| anyhow::anyhow!("storage.writer_cpu = {cpu}: {e}"))?;
    }
    Ok(settings)
}

/// `serve`, with its settings ([`serve_settings`]).
async fn serve_daemon(settings: Settings) -> anyhow::Result<()> {
    init_logging(&settings);
    if let Some(cpu) = settings.storage.writer_cpu {
        let others = storage::cpus::allowed()
            .map(|c| storage::cpus::list(&c))
            .unwrap_or_default();
        tracing::info!(cpu, others, "the writer has a CPU to itself");
    }
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", settings.listen))?;
    let shutdown = CancellationToken::new();
    crate::app::cancel_on_signals(shutdown.clone());
    crate::app::run(settings, listener, shutdown).await
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let flags = flag_overrides(&cli);
    match cli.command {
        Command::Openapi => {
            print!("{}", crate::openapi::document_json());
            Ok(())
        }
        Command::Serve(_) => anyhow::bail!("serve runs through serve_daemon"),
        Command::Migrate {
            beside_other_clients,
        } => {
            let settings = Settings::load(cli.config.as_deref(), &flags)?;
            if settings.storage.database_url.is_none() {
                crate::app::create_data_dir(&settings.data_dir)?;
            }
            let (from, to) = storage::migrate(&settings.storage_target(), beside_other_clients)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.detail))?;
            let db = settings.database_shown();
            println!(
                "{}",
                match from {
                    0 => format!("created database {db} at migration {to}"),
                    f if f < to => format!("database {db} migrated from migration {f} to {to}"),
                    _ => format!("database {db} is at migration {to} already"),
                }
            );
            Ok(())
        }
        Command::Keys(cmd) => {
            let settings = Settings::load(cli.config.as_deref(), &flags)?;
            keys(&settings, cmd).await
        }
        Command::Audit(AuditCommand::Verify {
            file,
            from_anchor,
            key,
        }) => audit_verify(&file, from_anchor.as_deref(), key.as_deref()),
        Command::Audit(AuditCommand::Export { since, until, out }) => {
            let settings = Settings::load(cli.config.as_deref(), &flags)?;
            existing_database(&settings)?;
            let gate = crate::app::open_offline(&settings).await?;
            let range = actiongate_gate::audit::Range { since, until };
            let result = audit_export(&gate, range, out.as_deref()).await;
            gate.close().await;
            result
        }
        Command::Backup { to } => {
            let settings = Settings::load(cli.config.as_deref(), &flags)?;
            existing_database(&settings)?;
            println!("{}", crate::backup::backup(&settings, &to).await?);
            Ok(())
        }
        Command::Client(_) => anyhow::bail!("client commands run through actiongate_cli::run"),
    }
}

/// Fails unless the database of `settings` exists (a Postgres database is
/// found when it is opened).
fn existing_database(settings: &Settings) -> anyhow::Result<()> {
    if settings.storage.database_url.is_some() {
        return Ok(());
    }
    let path = settings.database_path();
    if path.exists() {
        Ok(())
    } else {
        anyhow::bail!(
            "no database at {}: check --data-dir, or start `actiongate serve` there first",
            path.display()
        )
    }
}

async fn audit_export(
    gate: &actiongate_gate::Gate,
    range: actiongate_gate::audit::Range,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use futures::TryStreamExt;
    use std::io::Write;
    let mut sink: Box<dyn Write> = match out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let stream = actiongate_gate::audit::export(gate.event_log(), range);
    futures::pin_mut!(stream);
    while let Some(chunk) = stream
        .try_next()
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.detail))?
    {
        sink.write_all(chunk.as_bytes())?;
    }
    sink.flush()?;
    Ok(())
}

fn audit_verify(
    file: &std::path::Path,
    from_anchor: Option<&str>,
    key: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use actiongate_gate::audit::Anchor;
    let from = match from_anchor {
        Some(text) => {
            let parsed = text.split_once(':').and_then(|(seq, hash)| {
                let ok = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
                Some(Anchor {
                    seq: seq.parse().ok().filter(|s: &i64| *s >= 0)?,
                    hash: ok.then(|| hash.to_ascii_lowercase())?,
                })
            });
            Some(parsed.ok_or_else(|| {
                anyhow::anyhow!("--from-anchor: expected SEQ:HASH (a seq and 64 hex digits)")
            })?)
        }
        None => None,
    };
    let key = match key {
        Some(path) => Some(AuditKey::load(path).map_err(|e| anyhow::anyhow!("--key: {e}"))?),
        None => None,
    };
    let opts = actiongate_gate::audit::VerifyOptions { from, key };
    let f = std::fs::File::open(file)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", file.display()))?;
    match actiongate_gate::audit::verify(std::io::BufReader::new(f), &opts) {
        Ok(v) => {
            // The chain goes on from the hash before its first line:
            // genesis (64 zeros, before seq 1), or a pruned event's.
            let from = if v.start.seq == 0 {
                "genesis".to_owned()
            } else {
                format!("seq {}", v.start.seq)
            };
            println!(
                "ok: {} lines; the chain goes on from {from} ({}) and ends at seq {} ({})",
                v.events, v.start.hash, v.end.seq, v.end.hash
            );
            if opts.key.is_some() {
                println!(
                    "signed: {} anchors and the final line verified with the key",
                    v.anchors_signed
                );
            } else {
                println!(
                    "unsigned: {} anchors matched the chain, signatures not checked (pass --key)",
                    v.anchors_unchecked
                );
            }
            println!(
                "to verify the next export: --from-anchor {}:{}",
                v.end.seq, v.end.hash
            );
            Ok(())
        }
        Err((line, why)) => anyhow::bail!("{}: line {line}: {why}", file.display()),
    }
}

async fn keys(settings: &Settings, cmd: KeysCommand) -> anyhow::Result<()> {
    // Issuing a key may come before the first start; reading or revoking
    // keys of a database that is not there is a mistyped data dir, which
    // must not leave an empty database behind.
    if !matches!(cmd, KeysCommand::Create { .. }) {
        existing_database(settings)?;
    }
    let gate = crate::app::open_offline(settings).await?;
    let result = keys_on(&gate, cmd).await;
    gate.close().await;
    result
}

/// The command line's key commands, as the local administrator.
async fn keys_on(gate: &actiongate_gate::Gate, cmd: KeysCommand) -> anyhow::Result<()> {
    let local = actiongate_gate::Caller::local();
    let fail = |e: actiongate_gate::GateError| anyhow::anyhow!("{}", e.detail);
    match cmd {
        KeysCommand::Create {
            role,
            agent,
            name,
            json,
        } => {
            if role == Role::Agent && agent.is_none() {
                anyhow::bail!("an agent key needs the agent it acts as: pass --agent NAME");
            }
            let issued = gate
                .create_key(&local, role, agent, name)
                .await
                .map_err(fail)?;
            let stored = issued.key;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"id": stored.id, "key": issued.secret, "role": stored.role,
                        "agent": stored.agent, "name": stored.name, "created_at": stored.created_at})
                );
            } else {
                eprintln!(
                    "issued {} key {} (the key is shown only now):",
                    stored.role.as_str(),
                    stored.id
                );
                println!("{}", issued.secret);
            }
        }
        KeysCommand::List { json } => {
            let keys = gate.list_keys(&local).await.map_err(fail)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&keys)?);
            } else {
                println!(
                    "{:<21} {:<9} {:<20} {:<8} NAME",
                    "ID", "ROLE", "AGENT", "STATE"
                );
                for k in keys {
                    println!(
                        "{:<21} {:<9} {:<20} {:<8} {}",
                        k.id,
                        k.role.as_str(),
                        k.agent.as_deref().unwrap_or("-"),
                        if k.revoked_at.is_some() {
                            "revoked"
                        } else {
                            "active"
                        },
                        k.name
                    );
                }
            }
        }
        KeysCommand::Revoke { id } => {
            let key = gate.revoke_key(&local, &id).await.map_err(|e| {
                if e.is_not_found() {
                    anyhow::anyhow!("no key '{id}'")
                } else {
                    fail(e)
                }
            })?;
            println!("revoked {}", key.id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// clap's own checks of every command and flag (a long flag used
    /// twice in one command, say), which otherwise fire only when that
    /// command is run.
    #[test]
    fn every_command_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
