//! Where the follower is in the outbox: byte offset, line number, the
//! file's identity (device and inode), a generation bumped on truncation or
//! replacement, and a hash of the file's first bytes. Persisted atomically
//! (temp file, fsync, rename, fsync of the directory).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How many leading bytes identify a file's contents.
pub const HEAD_BYTES: u64 = 4096;

/// The persisted position.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Position {
    /// Format version.
    pub version: u32,
    /// Device of the file being followed (0: none yet).
    pub dev: u64,
    /// Inode of the file being followed (0: none yet).
    pub ino: u64,
    /// Bumped on each truncation or replacement under the same identity.
    pub generation: u64,
    /// Bytes consumed: the start of the first line not yet handled.
    pub offset: u64,
    /// Lines consumed (the next line's number is `line + 1`).
    pub line: u64,
    /// How many leading bytes `head_sha256` covers (at most [`HEAD_BYTES`],
    /// never past `offset`: bytes already consumed never change).
    pub head_len: u64,
    /// SHA-256 of the first `head_len` bytes, hex.
    pub head_sha256: String,
}

/// A file's identity: (device, inode).
pub fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        (1, 1)
    }
}

/// SHA-256 (hex) of the first `len` bytes of `file`, or `None` if it is shorter.
pub fn head_hash(file: &mut File, len: u64) -> std::io::Result<Option<String>> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = Vec::with_capacity(len as usize);
    file.take(len).read_to_end(&mut buf)?;
    if (buf.len() as u64) < len {
        return Ok(None);
    }
    Ok(Some(hex::encode(Sha256::digest(&buf))))
}

impl Position {
    /// A position at the start of a file.
    pub fn start_of(dev: u64, ino: u64, generation: u64) -> Position {
        Position {
            version: 1,
            dev,
            ino,
            generation,
            ..Position::default()
        }
    }

    /// Whether a file has been chosen yet.
    pub fn has_file(&self) -> bool {
        self.dev != 0 || self.ino != 0
    }

    /// Refreshes the head hash after the offset moved.
    pub fn update_head(&mut self, file: &mut File) -> std::io::Result<()> {
        let len = self.offset.min(HEAD_BYTES);
        if len == self.head_len {
            return Ok(());
        }
        if let Some(h) = head_hash(file, len)? {
            self.head_len = len;
            self.head_sha256 = h;
        }
        Ok(())
    }

    /// Whether `file` still starts with the bytes this position saw.
    pub fn head_matches(&self, file: &mut File) -> std::io::Result<bool> {
        if self.head_len == 0 {
            return Ok(true);
        }
        Ok(head_hash(file, self.head_len)?.as_deref() == Some(self.head_sha256.as_str()))
    }
}

/// Reads the state file; `None` if there is none.
pub fn load(path: &Path) -> Result<Option<Position>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("the state file {} is not valid: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "cannot read the state file {}: {e}",
            path.display()
        )),
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Writes the state file atomically and durably.
pub fn save(path: &Path, pos: &Position) -> std::io::Result<()> {
    let tmp = temp_path(path);
    let bytes = serde_json::to_vec_pretty(pos).map_err(std::io::Error::other)?;
    {
        let mut f = File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    // The rename is durable once the directory is.
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn save_then_load_round_trips_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(load(&path).unwrap(), None);
        let pos = Position {
            offset: 42,
            line: 3,
            ..Position::start_of(1, 2, 0)
        };
        save(&path, &pos).unwrap();
        assert_eq!(load(&path).unwrap(), Some(pos));
        assert!(!temp_path(&path).exists());
        std::fs::write(&path, b"{").unwrap();
        assert!(load(&path).is_err());
    }

    #[test]
    fn the_head_hash_tells_a_replaced_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.jsonl");
        std::fs::write(&path, b"line one\nline two\n").unwrap();
        let mut f = File::open(&path).unwrap();
        let mut pos = Position {
            offset: 9,
            ..Position::start_of(1, 1, 0)
        };
        pos.update_head(&mut f).unwrap();
        assert_eq!(pos.head_len, 9);
        assert!(pos.head_matches(&mut f).unwrap());
        std::fs::write(&path, b"LINE ONE\nline two\n").unwrap();
        let mut f = File::open(&path).unwrap();
        assert!(!pos.head_matches(&mut f).unwrap());
        std::fs::write(&path, b"li").unwrap();
        let mut f = File::open(&path).unwrap();
        assert!(!pos.head_matches(&mut f).unwrap());
    }
}
