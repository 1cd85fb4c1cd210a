//! The file actions: `create_file`, `update_file`, `update_readme` and
//! `read_file`, each on a path already confined by [`crate::paths`].
//!
//! `create_file` refuses to replace an existing file (use `update_file`);
//! `update_file` refuses a missing one and first saves the previous content
//! as `<file>.bak` (one generation: the previous `.bak` is replaced). Both
//! write atomically and keep an existing file's mode. `update_readme` appends
//! a dated line to the `## Auto-update log` section (created at the end of
//! the file, and the file created, if missing).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::actions::ActionError;
use crate::atomic::{self, NEW_FILE_MODE, Replace};
use crate::paths::{Access, PathError, Resolved, Root};

/// The heading of the section `update_readme` appends to.
pub const LOG_HEADING: &str = "## Auto-update log";

/// The README `update_readme` uses when no `filepath` is given.
pub const DEFAULT_README: &str = "README.md";

/// `create_file`: writes a new file; an existing one is left alone.
pub fn create(root: &Root, filepath: &str, content: &str) -> Result<Value, ActionError> {
    let r = root.resolve(filepath, Access::Write)?;
    if r.exists {
        return Err(ActionError::Exists(r.display));
    }
    atomic::write(&r.path, content.as_bytes(), NEW_FILE_MODE, Replace::No).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            ActionError::Exists(r.display.clone())
        } else {
            ActionError::Io(r.display.clone(), e)
        }
    })?;
    Ok(json!({"path": r.display, "bytes": content.len()}))
}

/// `update_file`: replaces an existing file, keeping the old one as `.bak`.
pub fn update(root: &Root, filepath: &str, content: &str) -> Result<Value, ActionError> {
    let r = root.resolve(filepath, Access::Write)?;
    if !r.exists {
        return Err(ActionError::Missing(r.display));
    }
    let io = |e| ActionError::Io(r.display.clone(), e);
    let mut file = open_regular(&r)?;
    let mode = atomic::mode_of(&r.path).map_err(io)?;
    let mut previous = Vec::new();
    file.read_to_end(&mut previous).map_err(io)?;
    let backup = backup_path(&r.path);
    atomic::write(&backup, &previous, mode, Replace::Yes).map_err(io)?;
    atomic::write(&r.path, content.as_bytes(), mode, Replace::Yes).map_err(io)?;
    Ok(json!({
        "path": r.display,
        "bytes": content.len(),
        "backup": format!("{}.bak", r.display),
        "previous_bytes": previous.len(),
    }))
}

/// `read_file`: the file's text (invalid UTF-8 replaced), at most `cap` bytes.
pub fn read(root: &Root, filepath: &str, cap: usize) -> Result<Value, ActionError> {
    let r = root.resolve(filepath, Access::Read)?;
    let io = |e| ActionError::Io(r.display.clone(), e);
    let file = open_regular(&r)?;
    let size = file.metadata().map_err(io)?.len();
    let mut buf = Vec::new();
    file.take(cap as u64).read_to_end(&mut buf).map_err(io)?;
    Ok(json!({
        "path": r.display,
        "content": String::from_utf8_lossy(&buf),
        "bytes": size,
        "truncated": size > buf.len() as u64,
    }))
}

/// `update_readme`: appends `- <date>: <reason>` to the auto-update log.
pub fn readme(
    root: &Root,
    filepath: Option<&str>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<Value, ActionError> {
    let r = root.resolve(filepath.unwrap_or(DEFAULT_README), Access::Write)?;
    let io = |e| ActionError::Io(r.display.clone(), e);
    let (text, mode) = if r.exists {
        let mut bytes = Vec::new();
        open_regular(&r)?.read_to_end(&mut bytes).map_err(io)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            ActionError::Io(
                r.display.clone(),
                io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"),
            )
        })?;
        (text, atomic::mode_of(&r.path).map_err(io)?)
    } else {
        (String::new(), NEW_FILE_MODE)
    };
    let one_line: String = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    let entry = format!("- {}: {one_line}", now.format("%Y-%m-%d %H:%M UTC"));
    let updated = append_log_entry(&text, &entry);
    atomic::write(&r.path, updated.as_bytes(), mode, Replace::Yes).map_err(io)?;
    Ok(json!({"path": r.display, "entry": entry, "created": !r.exists}))
}

/// Opens an existing file for reading, refusing anything but a regular
/// file. `O_NONBLOCK` so that opening a FIFO with no writer returns at once
/// instead of waiting for one; the type is then checked on the opened
/// handle, so a FIFO swapped in after [`Root::resolve`] is refused too. The
/// flag changes nothing for regular files.
fn open_regular(r: &Resolved) -> Result<File, ActionError> {
    let io = |e| ActionError::Io(r.display.clone(), e);
    let file = File::options()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(&r.path)
        .map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(PathError::NotARegularFile(r.display.clone()).into());
    }
    Ok(file)
}

fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".bak");
    path.with_file_name(name)
}

fn is_heading(line: &str) -> bool {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    (1..=6).contains(&hashes) && line[hashes..].starts_with(' ')
}

/// Inserts `entry` as the last line of the log section, creating it if absent.
fn append_log_entry(text: &str, entry: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(h) = lines
        .iter()
        .position(|l| l.trim_end().eq_ignore_ascii_case(LOG_HEADING))
    else {
        let mut out = text.to_owned();
        if !out.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str(&format!("{LOG_HEADING}\n\n{entry}\n"));
        return out;
    };
    let end = lines[h + 1..]
        .iter()
        .position(|l| is_heading(l))
        .map_or(lines.len(), |i| h + 1 + i);
    let mut at = end;
    while at > h + 1 && lines[at - 1].trim().is_empty() {
        at -= 1;
    }
    let mut out: Vec<&str> = lines[..at].to_vec();
    if at == h + 1 {
        out.push("");
    }
    out.push(entry);
    if end < lines.len() {
        out.push("");
        out.extend(&lines[end..]);
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::fs;

    #[test]
    fn the_log_section_is_created_at_the_end_when_missing() {
        assert_eq!(
            append_log_entry("# App\n\nText", "- e1"),
            "# App\n\nText\n\n## Auto-update log\n\n- e1\n"
        );
        assert_eq!(append_log_entry("", "- e1"), "## Auto-update log\n\n- e1\n");
    }

    #[test]
    fn entries_go_at_the_end_of_the_section_before_the_next_heading() {
        let text = "# App\n\n## Auto-update log\n\n- e1\n\n## License\n\nMIT\n";
        assert_eq!(
            append_log_entry(text, "- e2"),
            "# App\n\n## Auto-update log\n\n- e1\n- e2\n\n## License\n\nMIT\n"
        );
        let empty = "## Auto-update log\n## Next\n";
        assert_eq!(
            append_log_entry(empty, "- e1"),
            "## Auto-update log\n\n- e1\n\n## Next\n"
        );
    }

    #[test]
    fn update_keeps_the_previous_version_as_bak_and_create_refuses_to_clobber() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path()).unwrap();
        create(&root, "a/f.txt", "one").unwrap();
        assert!(matches!(
            create(&root, "a/f.txt", "two"),
            Err(ActionError::Exists(_))
        ));
        let v = update(&root, "a/f.txt", "two").unwrap();
        assert_eq!(v["backup"], "a/f.txt.bak");
        assert_eq!(
            fs::read_to_string(dir.path().join("a/f.txt")).unwrap(),
            "two"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("a/f.txt.bak")).unwrap(),
            "one"
        );
        assert!(matches!(
            update(&root, "b.txt", "x"),
            Err(ActionError::Missing(_))
        ));
    }

    #[test]
    fn a_fifo_is_refused_at_once_by_every_action_that_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path()).unwrap();
        for name in ["pipe", "README.md"] {
            nix::unistd::mkfifo(
                &dir.path().join(name),
                nix::sys::stat::Mode::from_bits_truncate(0o600),
            )
            .unwrap();
        }
        // Without the check these block for ever; run them on a thread so a
        // regression fails the test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        let root2 = root.clone();
        std::thread::spawn(move || {
            let kinds = [
                read(&root2, "pipe", 10).map(|_| ()),
                update(&root2, "pipe", "x").map(|_| ()),
                readme(&root2, None, "r", Utc::now()).map(|_| ()),
            ]
            .map(|r| r.map_err(|e| e.kind()));
            let _ = tx.send(kinds);
        });
        let kinds = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("reading a FIFO hung");
        assert_eq!(kinds, [Err("path_refused"); 3]);
        assert!(!dir.path().join("pipe.bak").exists());
    }

    #[test]
    fn read_caps_what_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path()).unwrap();
        fs::write(dir.path().join("f"), "abcdef").unwrap();
        let v = read(&root, "f", 4).unwrap();
        assert_eq!(v["content"], "abcd");
        assert_eq!(v["truncated"], true);
        assert_eq!(v["bytes"], 6);
        assert_eq!(read(&root, "f", 100).unwrap()["truncated"], false);
    }
}
