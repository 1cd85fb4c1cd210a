//! Black-box tests: upgrades and the way back. A database a newer version
//! migrated is refused by this one, in one line that says what to do, and
//! left as it was; one that needs migrating while another process (an
//! older daemon) has it open is not migrated.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::binary;

/// The migrations `db` records as applied, in order.
fn applied(db: &std::path::Path) -> Vec<i64> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut q = conn
        .prepare("SELECT version FROM _sqlx_migrations ORDER BY version")
        .unwrap();
    q.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// `actiongate ARGS --data-dir DATA`, which must exit 1: what it said.
fn refused(args: &[&str], data: &std::path::Path) -> String {
    let out = Command::new(binary("actiongate"))
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("ACTIONGATE_LOG", "off")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
    said
}

#[test]
fn a_database_a_newer_version_migrated_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = Command::new(binary("actiongate"))
        .args(["migrate", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success());
    let db = data.join("actiongate.db");
    // What a later version's migration leaves behind.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "INSERT INTO _sqlx_migrations (version, description, installed_on, success, \
             checksum, execution_time) VALUES (9999, 'later', CURRENT_TIMESTAMP, 1, x'00', 1)",
            [],
        )
        .unwrap();
    let before = applied(&db);

    for args in [
        vec!["serve", "--listen", "127.0.0.1:0"],
        vec!["migrate"],
        vec!["keys", "list"],
    ] {
        let started = Instant::now();
        let said = refused(&args, &data);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(said.trim().lines().count(), 1, "{args:?}: {said}");
        assert!(
            said.contains("newer actiongate") && said.contains("9999"),
            "{args:?}: {said}"
        );
        assert!(said.contains("docs/operations.md"), "{said}");
    }
    assert_eq!(applied(&db), before, "nothing was migrated or removed");
}

#[test]
fn a_database_another_process_has_open_is_not_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = crate::common::daemon::Daemon::start(&data, &[]);
    let db = data.join("actiongate.db");
    // As if the running daemon were of a version before the last migration.
    let last = *applied(&db).last().unwrap();
    let row: (String, Vec<u8>) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let row = conn
            .query_row(
                "SELECT description, checksum FROM _sqlx_migrations WHERE version = ?1",
                [last],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        conn.execute("DELETE FROM _sqlx_migrations WHERE version = ?1", [last])
            .unwrap();
        row
    };
    let before = applied(&db);
    let said = refused(&["migrate"], &data);
    assert!(
        said.contains(&format!("another process (pid {})", d.pid())),
        "{said}"
    );
    assert!(said.contains("older actiongate"), "{said}");
    assert_eq!(applied(&db), before, "nothing was migrated");
    // A command that only works on the database never upgrades it.
    let said = refused(&["keys", "list"], &data);
    assert!(
        said.contains(&format!("at migration {}", last - 1)) && said.contains("actiongate migrate"),
        "{said}"
    );
    assert_eq!(applied(&db), before);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (?1, ?2, 1, ?3, 1)",
            rusqlite::params![last, row.0, row.1],
        )
        .unwrap();
    // With nothing to migrate, the offline commands work beside the daemon.
    let out = Command::new(binary("actiongate"))
        .args(["keys", "list", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    d.stop();
}
