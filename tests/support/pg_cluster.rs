//! A throwaway Postgres cluster for tests: `initdb` into a temporary
//! directory, `postgres` on a free loopback port with trust auth, run as the
//! `postgres` user when the tests run as root. One cluster per test process
//! ([`Cluster::shared`]); each test makes its own database in it.
//!
//! Postgres is Debian's `postgresql` package (`.ci/run` installs it). Where
//! it is missing, [`Cluster::shared`] returns `None` and the Postgres half of
//! a test is skipped with a line saying so, unless `PG_TESTS_REQUIRED=1`
//! (set by CI), which makes a missing Postgres a failure.
//!
//! A watchdog process stops the cluster when the test process ends, however
//! it ends, so no server outlives the run.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A running cluster.
pub struct Cluster {
    /// Holds the data directory; removed when the process ends.
    dir: PathBuf,
    bin: PathBuf,
    /// The loopback port it listens on.
    pub port: u16,
    as_postgres: bool,
    /// Whether a commit is answered only once its WAL is written (see
    /// [`Cluster::start_durable`]).
    durable: bool,
}

static SHARED: OnceLock<Option<Cluster>> = OnceLock::new();
static NEXT_DB: AtomicU64 = AtomicU64::new(0);

/// Whether the run must have Postgres (CI sets it).
pub fn required() -> bool {
    std::env::var("PG_TESTS_REQUIRED").is_ok_and(|v| v == "1")
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`.
fn find_bin() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("PG_BIN_DIR") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists() && p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Cluster {
    /// The cluster of this test process, started on first use.
    pub fn shared() -> Option<&'static Cluster> {
        SHARED
            .get_or_init(|| match Cluster::start() {
                Ok(c) => Some(c),
                Err(e) if required() => {
                    panic!("Postgres is required (PG_TESTS_REQUIRED=1): {e}")
                }
                Err(e) => {
                    eprintln!("skipping the Postgres half of the tests: {e}");
                    None
                }
            })
            .as_ref()
    }

    /// Starts a new cluster (stopped when this process ends). Commits are
    /// answered before their WAL is written: fast, and a crash of the
    /// server may lose the last ones (use [`Cluster::start_durable`] where
    /// a test stops the server and counts what survived).
    pub fn start() -> Result<Cluster, String> {
        Cluster::start_with(false)
    }

    /// [`Cluster::start`], with every acknowledged commit written to the
    /// WAL before it is answered (`synchronous_commit=on`), so a stop of
    /// the server loses nothing acknowledged, as on a real deployment.
    pub fn start_durable() -> Result<Cluster, String> {
        Cluster::start_with(true)
    }

    fn start_with(durable: bool) -> Result<Cluster, String> {
        let bin = find_bin().ok_or("no Postgres found (apt-get install postgresql)")?;
        let dir = std::env::temp_dir().join(format!(
            "actiongate-pg-{}-{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let as_postgres = is_root();
        let cluster = Cluster {
            dir,
            bin,
            port: free_port(),
            as_postgres,
            durable,
        };
        if as_postgres {
            cluster.run_plain("chown", &["-R", "postgres:postgres", &cluster.dir_str()])?;
        }
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
        )?;
        cluster.start_server()?;
        cluster.watchdog();
        Ok(cluster)
    }

    fn dir_str(&self) -> String {
        self.dir.display().to_string()
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// (Re)starts the server on the same port and data.
    pub fn start_server(&self) -> Result<(), String> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit={} \
             -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB",
            self.port,
            self.dir_str(),
            if self.durable { "on" } else { "off" }
        );
        let log = self.dir.join("log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &opts,
                "-l",
                &log,
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
    }

    /// Stops the server at once (as a crash would), keeping its data.
    pub fn stop_server(&self) -> Result<(), String> {
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        )
    }

    /// A new empty database in the cluster; its URL.
    pub fn database(&self) -> String {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        );
        let created = self.psql(&format!("CREATE DATABASE {name}"));
        assert!(created.is_ok(), "CREATE DATABASE failed: {created:?}");
        self.url(&name)
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs one SQL statement on the `postgres` database.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        self.psql_on("postgres", sql)
    }

    /// Runs one SQL statement on the database of `url` (one of
    /// [`Cluster::database`]'s).
    pub fn psql_at(&self, url: &str, sql: &str) -> Result<String, String> {
        self.psql_on(url.rsplit('/').next().unwrap_or("postgres"), sql)
    }

    fn psql_on(&self, database: &str, sql: &str) -> Result<String, String> {
        let out = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(["-d", database, "-v", "ON_ERROR_STOP=1", "-Atc", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let out = self
            .command(program)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{program} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn run_plain(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let ok = Command::new(program)
            .args(args)
            .status()
            .map_err(|e| format!("{program}: {e}"))?
            .success();
        if ok {
            Ok(())
        } else {
            Err(format!("{program} failed"))
        }
    }

    /// A process that waits for this one to end, then stops the server and
    /// removes the directory.
    fn watchdog(&self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = if self.as_postgres {
            format!(
                "runuser -u postgres -- {} -D {} -m immediate stop",
                pg_ctl.display(),
                self.data()
            )
        } else {
            format!("{} -D {} -m immediate stop", pg_ctl.display(), self.data())
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop} >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            dir = self.dir_str()
        );
        let _ = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }

    /// The directory of the cluster's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
