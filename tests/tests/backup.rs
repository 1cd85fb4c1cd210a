//! Black-box tests: `actiongate backup` copies a data dir while its daemon
//! writes, and a daemon started on the copy has every action committed
//! before the backup began, the same keys, and an audit log that verifies
//! with the original audit key. Bad targets change nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::audit::{export, verify};
use crate::common;
use common::binary;
use common::daemon::{Daemon, Keyed, request_action, set_profile, status_json};
use serde_json::json;

fn backup(args: &[&str]) -> Output {
    Command::new(binary("actiongate"))
        .arg("backup")
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn action_status(k: &Keyed, base: &str, id: &str) -> u16 {
    let resp = k
        .http
        .get(format!("{base}/v1/actions/{id}"))
        .bearer_auth(&k.operator)
        .send()
        .await
        .unwrap();
    resp.status().as_u16()
}

#[tokio::test]
async fn a_backup_taken_while_the_daemon_writes_starts_a_daemon_with_everything_before_it() {
    let k = Keyed::start(&[]).await;
    let mut before = Vec::new();
    for i in 0..5 {
        let (s, _, b) = status_json(
            request_action(&k.http, &k.d.base, &k.agent, "shell", &format!("ls {i}")).await,
        )
        .await;
        assert_eq!(s, 201, "{b}");
        before.push(b["id"].as_str().unwrap().to_owned());
    }
    // A writer that keeps going while the copy is taken (allowed actions:
    // no pending limit to reach).
    set_profile(&k.http, &k.d.base, &k.admin, "bot", json!("open")).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (http, base, agent, stop) = (
            k.http.clone(),
            k.d.base.clone(),
            k.agent.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let resp =
                    request_action(&http, &base, &agent, "shell", &format!("echo {n}")).await;
                assert!(resp.status().is_success(), "{}", resp.status());
                n += 1;
            }
            n
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let copy = k.dir.path().join("copy");
    let data = k.d.data.to_str().unwrap().to_owned();
    let out = tokio::task::spawn_blocking({
        let copy = copy.clone();
        move || backup(&["--data-dir", &data, "--to", copy.to_str().unwrap()])
    })
    .await
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let written = writer.await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(written > 0, "the daemon was written to during the backup");
    assert!(
        text(&out).contains("--data-dir"),
        "says how to restore: {}",
        text(&out)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&copy), 0o700);
        for f in ["actiongate.db", "audit.key", "admin.key"] {
            assert_eq!(mode(&copy.join(f)), 0o600, "{f}");
        }
    }

    // A daemon on the copy, beside the first one.
    let restored = Daemon::start(&copy, &[]);
    assert_eq!(
        restored.admin_key(),
        k.admin,
        "the admin key file came along"
    );
    for id in &before {
        assert_eq!(action_status(&k, &restored.base, id).await, 200, "{id}");
    }
    // The operator key made on the original authenticates on the copy,
    // and its audit log verifies with the original audit key.
    let log = export(&k.http, &restored.base, &k.admin).await;
    let original_key = k.d.data.join("audit.key");
    let (ok, said) = verify(
        k.dir.path(),
        &log,
        &["--key", original_key.to_str().unwrap()],
    );
    assert!(ok, "{said}");
    restored.stop();
}

#[tokio::test]
async fn a_backup_refuses_an_existing_target_a_missing_database_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data, &[]);
    let taken = dir.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("keep"), "x").unwrap();
    let out = backup(&[
        "--data-dir",
        data.to_str().unwrap(),
        "--to",
        taken.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("exists"), "{}", text(&out));
    let names: Vec<_> = std::fs::read_dir(&taken)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["keep"], "the existing directory is left as it was");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let to = dir.path().join("never");
    let out = backup(&[
        "--data-dir",
        empty.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("no database"), "{}", text(&out));
    assert!(!to.exists());
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "no database was made"
    );

    let out = backup(&[
        "--database-url",
        "postgres://u:p@127.0.0.1:1/db",
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("pg_dump"), "{}", text(&out));
    assert!(!to.exists());
    // A target whose parent is missing: one line, nothing made.
    let deep = dir.path().join("no/such/dir");
    let out = backup(&[
        "--data-dir",
        data.to_str().unwrap(),
        "--to",
        deep.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out).trim().lines().count(), 1, "{}", text(&out));
    assert!(!dir.path().join("no").exists());
    d.stop();
}
