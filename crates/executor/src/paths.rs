//! Confinement to `--root`: every `filepath` an agent sends is resolved here,
//! and nothing outside the root is ever opened, written or created.
//!
//! Rules: a relative path is taken from the root; an absolute path must lie
//! under the root (as given or canonical); any `..` component is refused
//! outright (even one that would stay inside), so what the human approved
//! reads the same as what runs. Each directory on the way is resolved
//! canonically and must stay under the canonical root, so a symlinked
//! directory that leads out is refused; a final component that is a symlink
//! is followed only if its target is inside the root (and the target is then
//! what gets read or replaced); a dangling symlink is refused. Missing
//! directories are created, one checked level at a time, only for writes.
//!
//! This guards against what agents send, not against a local user racing to
//! swap directories for symlinks while an action runs.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a `filepath` was refused or could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path is empty.
    #[error("filepath is empty")]
    Empty,
    /// The path contains a `..` component.
    #[error("'{0}' contains '..'; paths must stay inside the root and may not climb")]
    ParentDir(String),
    /// An absolute path outside the root.
    #[error("'{0}' is outside the root")]
    Outside(String),
    /// A symlink on the way leads outside the root.
    #[error("'{0}' goes through a symlink that leads outside the root")]
    SymlinkEscapes(String),
    /// The final component is a symlink whose target does not exist.
    #[error("'{0}' is a dangling symlink")]
    DanglingSymlink(String),
    /// A component on the way is not a directory.
    #[error("'{0}': a parent is not a directory")]
    NotADirectory(String),
    /// The path names a directory (or the root itself), not a file.
    #[error("'{0}' is a directory, not a file")]
    IsADirectory(String),
    /// The path names a FIFO, socket or device, not a regular file: reading
    /// one could block for ever.
    #[error("'{0}' is not a regular file (a FIFO, socket or device)")]
    NotARegularFile(String),
    /// Reading a file, or a directory on the way, that does not exist.
    #[error("'{0}' does not exist")]
    NotFound(String),
    /// The file system failed.
    #[error("'{0}': {1}")]
    Io(String, io::Error),
}

impl PathError {
    /// Whether this is a refusal of the path (as opposed to a missing file or
    /// an I/O failure).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            PathError::Empty
                | PathError::ParentDir(_)
                | PathError::Outside(_)
                | PathError::SymlinkEscapes(_)
                | PathError::DanglingSymlink(_)
                | PathError::NotARegularFile(_)
        )
    }
}

/// What the caller means to do with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read an existing file; nothing is created.
    Read,
    /// Write the file; missing parent directories are created.
    Write,
}

/// A file path resolved inside the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute path with every directory canonical (the file may not exist yet).
    pub path: PathBuf,
    /// The path relative to the root, for messages and results.
    pub display: String,
    /// Whether the file exists.
    pub exists: bool,
}

/// The directory actions are confined to.
#[derive(Debug, Clone)]
pub struct Root {
    canonical: PathBuf,
    given: PathBuf,
}

impl Root {
    /// Opens the root; it must exist and be a directory.
    pub fn new(dir: &Path) -> io::Result<Root> {
        let given = std::path::absolute(dir)?;
        let canonical = fs::canonicalize(dir)?;
        if !canonical.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(Root { canonical, given })
    }

    /// The canonical root.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// Whether `p` (which need not exist) lies inside the root.
    pub fn contains(&self, p: &Path) -> bool {
        let Ok(abs) = std::path::absolute(p) else {
            return false;
        };
        let canon = canonical_prefix(&abs);
        canon.starts_with(&self.canonical) || abs.starts_with(&self.given)
    }

    /// Resolves an agent's `filepath`.
    pub fn resolve(&self, filepath: &str, access: Access) -> Result<Resolved, PathError> {
        let shown = || filepath.to_owned();
        if filepath.is_empty() {
            return Err(PathError::Empty);
        }
        let raw = Path::new(filepath);
        if raw.components().any(|c| c == Component::ParentDir) {
            return Err(PathError::ParentDir(shown()));
        }
        let rel = if raw.is_absolute() {
            raw.strip_prefix(&self.canonical)
                .or_else(|_| raw.strip_prefix(&self.given))
                .map_err(|_| PathError::Outside(shown()))?
        } else {
            raw
        };
        let mut names = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(n) => names.push(n),
                Component::CurDir => {}
                _ => return Err(PathError::Outside(shown())),
            }
        }
        let Some((file, dirs)) = names.split_last() else {
            return Err(PathError::IsADirectory(shown()));
        };
        let mut cur = self.canonical.clone();
        for d in dirs {
            let next = cur.join(d);
            match fs::symlink_metadata(&next) {
                Ok(_) => {
                    let real = fs::canonicalize(&next).map_err(|e| io_err(filepath, e))?;
                    if !real.starts_with(&self.canonical) {
                        return Err(PathError::SymlinkEscapes(shown()));
                    }
                    if !real.is_dir() {
                        return Err(PathError::NotADirectory(shown()));
                    }
                    cur = real;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => match access {
                    Access::Read => return Err(PathError::NotFound(shown())),
                    Access::Write => {
                        // `cur` is canonical and inside, so `next` is a plain new entry.
                        match fs::create_dir(&next) {
                            Ok(()) => {
                                crate::atomic::sync_dir(&cur).map_err(|e| io_err(filepath, e))?
                            }
                            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                                // Created concurrently: check it like any other.
                                let real =
                                    fs::canonicalize(&next).map_err(|e| io_err(filepath, e))?;
                                if !real.starts_with(&self.canonical) || !real.is_dir() {
                                    return Err(PathError::SymlinkEscapes(shown()));
                                }
                            }
                            Err(e) => return Err(io_err(filepath, e)),
                        }
                        cur = next;
                    }
                },
                Err(e) => return Err(io_err(filepath, e)),
            }
        }
        let full = cur.join(file);
        let (path, exists) = match fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_symlink() => match fs::canonicalize(&full) {
                Ok(real) if real.starts_with(&self.canonical) => (real, true),
                Ok(_) => return Err(PathError::SymlinkEscapes(shown())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(PathError::DanglingSymlink(shown()));
                }
                Err(e) => return Err(io_err(filepath, e)),
            },
            Ok(_) => (full, true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (full, false),
            Err(e) => return Err(io_err(filepath, e)),
        };
        if path.is_dir() {
            return Err(PathError::IsADirectory(shown()));
        }
        if !exists && access == Access::Read {
            return Err(PathError::NotFound(shown()));
        }
        let display = path
            .strip_prefix(&self.canonical)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.to_string_lossy().into_owned());
        Ok(Resolved {
            path,
            display,
            exists,
        })
    }
}

fn io_err(filepath: &str, e: io::Error) -> PathError {
    PathError::Io(filepath.to_owned(), e)
}

/// Canonicalizes the longest existing prefix of `p` and appends the rest.
fn canonical_prefix(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = fs::canonicalize(&existing) {
            let mut out = c;
            for r in rest.iter().rev() {
                out.push(r);
            }
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_owned()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Root) {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "s").unwrap();
        let r = Root::new(root.path()).unwrap();
        (root, outside, r)
    }

    #[test]
    fn relative_paths_resolve_under_the_root_and_create_dirs_for_writes() {
        let (_d, _o, root) = setup();
        let r = root.resolve("src/app.py", Access::Write).unwrap();
        assert_eq!(r.display, "src/app.py");
        assert!(!r.exists);
        assert!(root.path().join("src").is_dir());
        assert!(matches!(
            root.resolve("lib/x.py", Access::Read),
            Err(PathError::NotFound(_))
        ));
        assert!(
            !root.path().join("lib").exists(),
            "a read created a directory"
        );
    }

    #[test]
    fn absolute_paths_inside_the_root_are_accepted() {
        let (_d, _o, root) = setup();
        let abs = root.path().join("a.txt");
        let r = root.resolve(abs.to_str().unwrap(), Access::Write).unwrap();
        assert_eq!(r.display, "a.txt");
    }

    #[test]
    fn escapes_are_refused() {
        let (_d, outside, root) = setup();
        symlink(outside.path(), root.path().join("out")).unwrap();
        symlink(
            outside.path().join("secret.txt"),
            root.path().join("link.txt"),
        )
        .unwrap();
        symlink(root.path().join("nowhere"), root.path().join("dangling")).unwrap();
        for (p, want) in [
            ("../x", "ParentDir"),
            ("a/../../x", "ParentDir"),
            ("a/../b", "ParentDir"),
            ("/etc/passwd", "Outside"),
            ("out/secret.txt", "SymlinkEscapes"),
            ("out/new.txt", "SymlinkEscapes"),
            ("link.txt", "SymlinkEscapes"),
            ("dangling", "DanglingSymlink"),
            ("", "Empty"),
        ] {
            for access in [Access::Read, Access::Write] {
                let err = root.resolve(p, access).unwrap_err();
                assert!(format!("{err:?}").starts_with(want), "{p}: {err:?}");
                assert!(err.is_refusal(), "{p}");
            }
        }
        assert!(!outside.path().join("new.txt").exists());
    }

    #[test]
    fn symlinks_that_stay_inside_are_followed() {
        let (_d, _o, root) = setup();
        fs::create_dir(root.path().join("real")).unwrap();
        fs::write(root.path().join("real/f.txt"), "x").unwrap();
        symlink(root.path().join("real"), root.path().join("alias")).unwrap();
        symlink(root.path().join("real/f.txt"), root.path().join("f-link")).unwrap();
        let r = root.resolve("alias/f.txt", Access::Read).unwrap();
        assert_eq!(r.display, "real/f.txt");
        let r = root.resolve("f-link", Access::Write).unwrap();
        assert_eq!(r.display, "real/f.txt");
    }

    #[test]
    fn directories_and_files_used_as_directories_are_refused() {
        let (_d, _o, root) = setup();
        fs::create_dir(root.path().join("d")).unwrap();
        fs::write(root.path().join("f"), "x").unwrap();
        assert!(matches!(
            root.resolve("d", Access::Write),
            Err(PathError::IsADirectory(_))
        ));
        assert!(matches!(
            root.resolve(".", Access::Write),
            Err(PathError::IsADirectory(_))
        ));
        assert!(matches!(
            root.resolve("f/g", Access::Write),
            Err(PathError::NotADirectory(_))
        ));
    }

    #[test]
    fn contains_checks_paths_that_do_not_exist_yet() {
        let (_d, outside, root) = setup();
        assert!(root.contains(&root.path().join("state/x")));
        assert!(!root.contains(&outside.path().join("state")));
    }
}
