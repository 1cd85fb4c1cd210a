//! The command line: flags, registration, and starting the server.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use tokio::net::TcpListener;

use crate::dedupe::DEFAULT_RETENTION_SECS;
use crate::registration::{self, HANDLER_ID};
use crate::server::{Executor, Settings};

/// actiongate-executor: runs actiongate's file and command actions (seed 002)
/// under one root directory, for webhooks signed by the daemon.
#[derive(Debug, Parser)]
#[command(name = "actiongate-executor", version, about)]
pub struct Cli {
    /// Directory every action is confined to (and commands run in).
    #[arg(long, value_name = "DIR", required_unless_present_any = ["print_registration", "register_only"])]
    pub root: Option<PathBuf>,
    /// Directory of the delivery record, the saved secret and the journal;
    /// must not be inside --root.
    #[arg(long, value_name = "DIR", default_value = "executor-state")]
    pub state_dir: PathBuf,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    pub listen: String,
    /// The webhook URL the daemon should call (default `http://<listen>/`).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Register the handler with the daemon at URL, save its secret, then serve.
    #[arg(long, value_name = "URL")]
    pub register: Option<String>,
    /// With --register: exit after registering.
    #[arg(long, requires = "register")]
    pub register_only: bool,
    /// Admin key for --register.
    #[arg(long, env = "ACTIONGATE_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,
    /// The handler's webhook secret (`whsec_…`); default: the one saved by --register.
    #[arg(long, env = "ACTIONGATE_EXECUTOR_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// Print the registration JSON and exit.
    #[arg(long)]
    pub print_registration: bool,
    /// Commands are killed after this long (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub command_timeout: Duration,
    /// Answer 202 at once and post results to the daemon later.
    #[arg(long = "async")]
    pub async_results: bool,
    /// The daemon's base URL for async results (default: the --register URL).
    #[arg(long, value_name = "URL", env = "ACTIONGATE_URL")]
    pub daemon_url: Option<String>,
    /// Journal file (default `<state-dir>/agent_actions.jsonl`).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Handler id to register and to accept deliveries for.
    #[arg(long, value_name = "ID", default_value = HANDLER_ID)]
    pub handler_id: String,
    /// Cap, in bytes, of each of a command's stdout and stderr.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024)]
    pub output_cap: usize,
    /// Cap, in bytes, of what read_file returns.
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    pub read_cap: usize,
    /// Run only what a human allowed: each delivery's signed receipt must
    /// verify with this key (a JWK file, as `actiongate receipt key`
    /// prints it) and bind exactly its action and params. A leaked webhook
    /// secret then runs nothing new.
    #[arg(long, value_name = "JWK_FILE")]
    pub require_human_receipt: Option<PathBuf>,
    /// With --require-human-receipt: refuse a receipt given longer ago than
    /// this (e.g. 24h, 30m), so one a human gave cannot be replayed for long
    /// to an executor without its record (a fresh replica or state dir).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration, requires = "require_human_receipt")]
    pub receipt_max_age: Duration,
    /// Time a client has to send a request's head, and as long again for
    /// its body; past it the connection is closed (e.g. 30s).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub request_read_timeout: Duration,
    /// Most connections open at once; past it new ones wait until one closes.
    #[arg(long, value_name = "N", default_value_t = crate::server::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
}

/// Runs the command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    if cli.print_registration {
        let url = cli
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}/", cli.listen));
        let reg = registration::registration(&cli.handler_id, &url, cli.command_timeout);
        // A reader that stops early (`| head`) is not an error.
        use std::io::Write;
        let text = serde_json::to_string_pretty(&reg)?;
        return match writeln!(std::io::stdout().lock(), "{text}") {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
            _ => Ok(()),
        };
    }
    if let Some(root) = &cli.root {
        crate::paths::Root::new(root).with_context(|| format!("--root {}", root.display()))?;
    }
    // Bind before registering, so the registered URL has the real port.
    let listener = if cli.register_only {
        None
    } else {
        Some(
            TcpListener::bind(&cli.listen)
                .await
                .with_context(|| format!("cannot listen on {}", cli.listen))?,
        )
    };
    let public_url = match (&cli.public_url, &listener) {
        (Some(u), _) => u.clone(),
        (None, Some(l)) => format!("http://{}/", l.local_addr()?),
        (None, None) => format!("http://{}/", cli.listen),
    };
    let mut secret = cli.secret.clone();
    if let Some(daemon) = &cli.register {
        let Some(key) = &cli.admin_key else {
            bail!("--register needs an admin key: --admin-key or ACTIONGATE_KEY");
        };
        let reg = registration::registration(&cli.handler_id, &public_url, cli.command_timeout);
        let s = registration::register(daemon, key, &reg, &cli.state_dir, cli.secret.as_deref())
            .await?;
        eprintln!(
            "registered handler '{}' with {daemon} (webhook {public_url}); secret in {}",
            cli.handler_id,
            registration::secret_path(&cli.state_dir).display()
        );
        secret = Some(s);
    }
    let Some(listener) = listener else {
        return Ok(());
    };
    let secret = match secret {
        Some(s) => s,
        None => std::fs::read_to_string(registration::secret_path(&cli.state_dir))
            .map(|s| s.trim().to_owned())
            .map_err(|_| {
                anyhow::anyhow!(
                    "no webhook secret: register with --register URL, or pass --secret (or ACTIONGATE_EXECUTOR_SECRET)"
                )
            })?,
    };
    let async_results = if cli.async_results {
        Some(
            cli.daemon_url
                .clone()
                .or_else(|| cli.register.clone())
                .context("--async needs --daemon-url (or --register) to post results to")?,
        )
    } else {
        None
    };
    let root = cli.root.clone().context("--root is required")?;
    let executor = Executor::open(&Settings {
        root,
        state_dir: cli.state_dir.clone(),
        journal: cli.log.clone(),
        secret,
        handler_id: cli.handler_id.clone(),
        command_timeout: cli.command_timeout,
        output_cap: cli.output_cap,
        read_cap: cli.read_cap,
        async_results,
        dedupe_retention_secs: DEFAULT_RETENTION_SECS,
        require_human_receipt: match &cli.require_human_receipt {
            Some(p) => Some(
                crate::receipts::load_key(p)
                    .map_err(|e| anyhow::anyhow!("--require-human-receipt: {e}"))?,
            ),
            None => None,
        },
        receipt_max_age: cli.receipt_max_age,
        request_read: cli.request_read_timeout,
        max_connections: cli.max_connections,
    })?;
    let mut out = std::io::stdout();
    writeln!(out, "actiongate-executor listening on {public_url}")?;
    out.flush()?;
    executor.serve(listener, shutdown_signal()).await?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
