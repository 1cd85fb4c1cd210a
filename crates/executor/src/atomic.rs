//! Durable file writes: a temporary file in the target's directory, fsynced,
//! renamed over the target, then the directory fsynced, so a crash leaves
//! either the old content or the new, never a torn file.

use std::fs::{self, File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Mode of files the executor creates. Set explicitly because the temporary
/// file starts as 0600.
pub const NEW_FILE_MODE: u32 = 0o644;

/// The setuid and setgid bits: never written. A rewrite by an agent would
/// otherwise keep a privileged program's bits on content the agent chose.
const SET_ID_BITS: u32 = 0o6000;

/// Whether an existing target may be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    /// Replace whatever is there.
    Yes,
    /// Fail with `AlreadyExists` if the target exists (checked atomically by
    /// the rename itself).
    No,
}

/// Writes `bytes` to `path` atomically with the given mode, less the setuid
/// and setgid bits.
pub fn write(path: &Path, bytes: &[u8], mode: u32, replace: Replace) -> io::Result<()> {
    let mode = mode & !SET_ID_BITS;
    let dir = parent(path)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".actiongate-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file()
        .set_permissions(Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    match replace {
        Replace::Yes => tmp.persist(path).map_err(|e| e.error)?,
        Replace::No => tmp.persist_noclobber(path).map_err(|e| e.error)?,
    };
    sync_dir(dir)
}

/// Fsyncs a directory so that entries created or renamed in it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The mode bits of an existing file, to keep them across a rewrite.
pub fn mode_of(path: &Path) -> io::Result<u32> {
    Ok(fs::metadata(path)?.permissions().mode() & 0o7777)
}

fn parent(path: &Path) -> io::Result<&Path> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => Ok(p),
        _ => Ok(Path::new(".")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn writes_replaces_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        write(&p, b"one", NEW_FILE_MODE, Replace::No).unwrap();
        write(&p, b"two", NEW_FILE_MODE, Replace::Yes).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(mode_of(&p).unwrap(), NEW_FILE_MODE);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_rewrite_drops_setuid_and_setgid_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tool");
        write(&p, b"one", 0o755, Replace::No).unwrap();
        fs::set_permissions(&p, Permissions::from_mode(0o6755)).unwrap();
        assert_eq!(mode_of(&p).unwrap(), 0o6755);
        write(&p, b"two", mode_of(&p).unwrap(), Replace::Yes).unwrap();
        assert_eq!(mode_of(&p).unwrap(), 0o755);
    }

    #[test]
    fn no_replace_refuses_an_existing_file_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        write(&p, b"one", NEW_FILE_MODE, Replace::No).unwrap();
        let err = write(&p, b"two", NEW_FILE_MODE, Replace::No).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&p).unwrap(), "one");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
