//! `actiongate backup`: a data dir copied while its daemon runs, as a new
//! data dir a daemon starts on (docs/operations.md).

use std::path::{Path, PathBuf};

use actiongate_gate::storage;

use crate::config::Settings;

/// The files of a data dir besides the database that a restored daemon
/// needs: the audit key (anchors signed with it; a new one would not
/// verify the old) and the first admin key.
const KEY_FILES: [&str; 2] = ["audit.key", "admin.key"];

/// Copies the data dir of `settings` to `to`, a directory made for it
/// (refused when it exists): a snapshot of the database and the key files,
/// each readable by its owner alone. What it wrote, for the user. On
/// failure what it made is removed again.
pub async fn backup(settings: &Settings, to: &Path) -> anyhow::Result<String> {
    if settings.storage.database_url.is_some() {
        anyhow::bail!(
            "the database is on Postgres: back it up with pg_dump, and keep a copy of {} \
             (docs/operations.md)",
            settings.audit_key_path().display()
        );
    }
    let db = settings.database_path();
    make_private_dir(to)?;
    let done = copy_into(settings, &db, to).await;
    if done.is_err() {
        for name in KEY_FILES.iter().copied().chain(["actiongate.db"]) {
            let _ = std::fs::remove_file(to.join(name));
        }
        let _ = std::fs::remove_dir(to);
    }
    done
}

async fn copy_into(settings: &Settings, db: &Path, to: &Path) -> anyhow::Result<String> {
    let size = storage::backup_sqlite(db, &to.join("actiongate.db"))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut copied = vec![format!("actiongate.db ({size} bytes)")];
    for name in KEY_FILES {
        let from: PathBuf = settings.data_dir.join(name);
        if !from.exists() {
            continue;
        }
        copy_private(&from, &to.join(name))
            .map_err(|e| anyhow::anyhow!("copying {}: {e}", from.display()))?;
        copied.push(name.to_owned());
    }
    Ok(format!(
        "backed up {} to {}: {}; start a daemon with --data-dir {} to restore it",
        settings.data_dir.display(),
        to.display(),
        copied.join(", "),
        to.display()
    ))
}

/// Creates `dir` (not its parents) for its owner alone; refused when it
/// exists, so no earlier backup is mixed with this one.
fn make_private_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
            "{} exists: give a new directory for the backup",
            dir.display()
        ),
        _ => anyhow::anyhow!("cannot create {}: {e}", dir.display()),
    })
}

/// Copies `from` to the new file `to`, readable by its owner alone.
fn copy_private(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        file.mode(0o600);
    }
    let mut out = file.open(to)?;
    std::io::copy(&mut std::fs::File::open(from)?, &mut out)?;
    out.sync_all()
}
