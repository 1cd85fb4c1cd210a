//! `actiongate outbox follow PATH`: follows a JSONL outbox (seed 002), each
//! line `{"actions": [...]}`, and submits every action exactly once to the
//! daemon as a handler action of the reference executor (`fs`), appending
//! each outcome to a JSONL status file.
//!
//! Exactly once: the follower keeps the byte offset of the first line not
//! yet handled (see [`position`]) and saves it after each line whose
//! actions were all answered by the daemon; each action carries an
//! idempotency key made of the file's identity, the line number, its index
//! and the line's hash (see [`line`]), so a line submitted again after a
//! crash returns the action it created the first time. New bytes are
//! noticed through file-change notifications (`notify`) with a poll timer
//! as fallback; only bytes past the offset are read, so a long outbox costs
//! no more per new line than a short one. [`submit`] sends a line's actions
//! and writes the status file.

pub mod line;
pub mod position;
pub mod submit;

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand};

use super::Exit;
use super::http::{Api, Conn};
use super::output::one_line;
use line::LineId;
use position::Position;
use submit::Sink;

/// `outbox` subcommands.
#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// Follow a JSONL outbox and submit each new action exactly once (agent key).
    Follow(FollowArgs),
}

/// Flags of `outbox follow`.
#[derive(Debug, Args)]
pub struct FollowArgs {
    /// Where the daemon is; the key must be an agent key.
    #[command(flatten)]
    pub conn: Conn,
    /// The outbox: one `{"actions": [...]}` per line.
    pub path: PathBuf,
    /// Where to append one JSON line per action outcome (default: PATH.status.jsonl).
    #[arg(long)]
    pub status_file: Option<PathBuf>,
    /// Where to keep the position (default: PATH.state.json).
    #[arg(long)]
    pub state_file: Option<PathBuf>,
    /// Also submit actions marked `"demo": true` or `"template": true`.
    #[arg(long)]
    pub include_demo: bool,
    /// The handler that runs the actions.
    #[arg(long, default_value = "fs")]
    pub handler: String,
    /// Seconds to wait for each action to settle before recording it (0: record the decision).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    pub wait: u64,
    /// On first start (no state file), skip what the outbox already holds.
    #[arg(long)]
    pub from_end: bool,
    /// Handle what is there now, then exit.
    #[arg(long)]
    pub once: bool,
    /// Fallback poll interval in milliseconds (file-change notifications
    /// usually wake the follower first).
    #[arg(long, default_value_t = 500, value_name = "MS")]
    pub poll_ms: u64,
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Logs one line on stderr.
pub(crate) fn log(msg: &str) {
    eprintln!("actiongate outbox: {}", one_line(msg));
}

/// The size, modification time and identity last handled: when a poll
/// finds them unchanged there is nothing to read.
type Seen = (u64, Option<SystemTime>, (u64, u64));

struct Follower {
    args: FollowArgs,
    sink: Sink,
    pos: Position,
    state_path: PathBuf,
    /// The open outbox, whose identity is the position's.
    file: Option<File>,
    seen: Option<Seen>,
    missing_logged: bool,
}

/// `outbox follow`: runs until killed (or, with `--once`, until caught up).
pub async fn follow(args: FollowArgs) -> Exit {
    let mut f = match Follower::new(args) {
        Ok(f) => f,
        Err(e) => {
            log(&e);
            return Exit::Usage;
        }
    };
    let wake = Arc::new(tokio::sync::Notify::new());
    let watcher = f.watch(wake.clone());
    let poll = Duration::from_millis(if watcher.is_some() {
        f.args.poll_ms.max(10)
    } else {
        f.args.poll_ms.clamp(10, 100)
    });
    loop {
        f.step().await;
        if f.args.once {
            return Exit::Ok;
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(poll) => {}
        }
    }
}

impl Follower {
    fn new(args: FollowArgs) -> Result<Follower, String> {
        let api = Api::new(&args.conn).map_err(|e| e.to_string())?;
        api.require_key().map_err(|e| e.to_string())?;
        let dir = parent(&args.path);
        if !dir.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        let state_path = args
            .state_file
            .clone()
            .unwrap_or_else(|| sibling(&args.path, ".state.json"));
        let status_path = args
            .status_file
            .clone()
            .unwrap_or_else(|| sibling(&args.path, ".status.jsonl"));
        let pos = position::load(&state_path)?.unwrap_or_default();
        let status = submit::open_status(&status_path)
            .map_err(|e| format!("cannot open the status file {}: {e}", status_path.display()))?;
        let sink = Sink {
            api,
            wait: Duration::from_secs(args.wait),
            status,
            handler: args.handler.clone(),
            include_demo: args.include_demo,
        };
        Ok(Follower {
            args,
            sink,
            pos,
            state_path,
            file: None,
            seen: None,
            missing_logged: false,
        })
    }

    /// Watches the outbox's directory (which sees creation and rotation
    /// too); `None` if notifications are unavailable.
    fn watch(&self, wake: Arc<tokio::sync::Notify>) -> Option<notify::RecommendedWatcher> {
        use notify::Watcher;
        let name = self.args.path.file_name().map(|n| n.to_os_string());
        let handler = move |res: notify::Result<notify::Event>| {
            let relevant = match &res {
                Ok(ev) => {
                    ev.paths.is_empty() || ev.paths.iter().any(|p| p.file_name() == name.as_deref())
                }
                Err(_) => true,
            };
            if relevant {
                wake.notify_one();
            }
        };
        let mut w = match notify::recommended_watcher(handler) {
            Ok(w) => w,
            Err(e) => {
                log(&format!("no file-change notifications ({e}); polling"));
                return None;
            }
        };
        match w.watch(parent(&self.args.path), notify::RecursiveMode::NonRecursive) {
            Ok(()) => Some(w),
            Err(e) => {
                log(&format!("no file-change notifications ({e}); polling"));
                None
            }
        }
    }

    fn save(&mut self) {
        if let Err(e) = position::save(&self.state_path, &self.pos) {
            log(&format!(
                "cannot save the position to {}: {e} (will retry)",
                self.state_path.display()
            ));
        }
    }

    /// Starts over at the beginning of the file now at the path.
    fn restart(&mut self, dev: u64, ino: u64, why: &str) {
        log(&format!(
            "{} {why}; reading it from the beginning",
            self.args.path.display()
        ));
        self.pos = Position::start_of(dev, ino, self.pos.generation + 1);
        self.save();
    }

    /// Handles whatever changed since the last step.
    async fn step(&mut self) {
        let meta = match std::fs::metadata(&self.args.path) {
            Ok(m) => m,
            Err(e) => {
                if !self.missing_logged {
                    log(&format!(
                        "cannot read {} ({e}); waiting for it",
                        self.args.path.display()
                    ));
                    self.missing_logged = true;
                }
                return;
            }
        };
        self.missing_logged = false;
        let (dev, ino) = position::identity(&meta);
        let seen: Seen = (meta.len(), meta.modified().ok(), (dev, ino));
        if self.seen == Some(seen) {
            return;
        }
        if !self.pos.has_file() {
            self.pos = Position::start_of(dev, ino, 0);
            if self.args.from_end
                && let Err(e) = self.skip_to_end()
            {
                log(&format!("cannot read {}: {e}", self.args.path.display()));
                return;
            }
            self.save();
        } else if (dev, ino) != (self.pos.dev, self.pos.ino) {
            // Rotated: finish the lines the old file got before the switch.
            if let Some(old) = self.file.take() {
                let _ = self.read_new(old).await;
            }
            self.restart(dev, ino, "was replaced by a new file");
        }
        let mut file = match self.file.take() {
            Some(f) => f,
            None => match File::open(&self.args.path) {
                Ok(f) => f,
                Err(e) => {
                    log(&format!("cannot open {}: {e}", self.args.path.display()));
                    return;
                }
            },
        };
        match file.metadata().map(|m| position::identity(&m)) {
            Ok(id) if id == (dev, ino) => {}
            // It changed between the stat and the open: look again.
            _ => return,
        }
        if meta.len() < self.pos.offset {
            self.restart(dev, ino, "was truncated");
        } else {
            match self.pos.head_matches(&mut file) {
                Ok(true) => {}
                Ok(false) => self.restart(dev, ino, "was rewritten (its first bytes changed)"),
                Err(e) => {
                    log(&format!("cannot read {}: {e}", self.args.path.display()));
                    return;
                }
            }
        }
        match self.read_new(file).await {
            Ok(file) => {
                self.file = Some(file);
                self.seen = Some(seen);
            }
            Err(e) => log(&format!("cannot read {}: {e}", self.args.path.display())),
        }
    }

    /// `--from-end` on first start: the position after the last complete line.
    fn skip_to_end(&mut self) -> std::io::Result<()> {
        let mut reader = BufReader::with_capacity(1 << 16, File::open(&self.args.path)?);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf)?;
            if n == 0 || buf.last() != Some(&b'\n') {
                break;
            }
            self.pos.offset += n as u64;
            self.pos.line += 1;
        }
        let mut file = File::open(&self.args.path)?;
        self.pos.update_head(&mut file)?;
        log(&format!(
            "starting at the end of {} (line {})",
            self.args.path.display(),
            self.pos.line
        ));
        Ok(())
    }

    /// Handles every complete line past the offset; a partial last line
    /// waits for its newline. Returns the file for the next step.
    async fn read_new(&mut self, mut file: File) -> std::io::Result<File> {
        file.seek(SeekFrom::Start(self.pos.offset))?;
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut buf = Vec::new();
        let mut unsaved = false;
        loop {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf)?;
            if n == 0 || buf.last() != Some(&b'\n') {
                break;
            }
            let content = buf
                .strip_suffix(b"\n")
                .map(|b| b.strip_suffix(b"\r").unwrap_or(b))
                .unwrap_or(&buf);
            let line_no = self.pos.line + 1;
            let id = LineId {
                dev: self.pos.dev,
                ino: self.pos.ino,
                generation: self.pos.generation,
                line: line_no,
            };
            let submitted = self.sink.handle_line(id, content).await;
            self.pos.offset += n as u64;
            self.pos.line = line_no;
            if submitted {
                self.refresh_head(reader.get_ref());
                self.save();
                unsaved = false;
            } else {
                // Nothing was sent for it: handling it again after a crash
                // costs nothing, so its position is saved with a later one.
                unsaved = true;
            }
        }
        if unsaved {
            self.refresh_head(reader.get_ref());
            self.save();
        }
        Ok(reader.into_inner())
    }

    /// Updates the head hash without moving the reader's file offset.
    fn refresh_head(&mut self, file: &File) {
        let len = self.pos.offset.min(position::HEAD_BYTES);
        if len == self.pos.head_len {
            return;
        }
        let mut buf = vec![0u8; len as usize];
        #[cfg(unix)]
        let read = {
            use std::os::unix::fs::FileExt;
            file.read_exact_at(&mut buf, 0)
        };
        #[cfg(not(unix))]
        let read = {
            use std::io::Read;
            let _ = file;
            File::open(&self.args.path).and_then(|mut f| f.read_exact(&mut buf))
        };
        match read {
            Ok(()) => {
                use sha2::Digest;
                self.pos.head_len = len;
                self.pos.head_sha256 = hex::encode(sha2::Sha256::digest(&buf));
            }
            Err(e) => log(&format!("cannot read {}: {e}", self.args.path.display())),
        }
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
