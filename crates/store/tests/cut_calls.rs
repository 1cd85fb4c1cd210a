//! A call the daemon cuts off (its bound, or a client gone) must not leave
//! its connection inside a transaction: the next caller of that connection
//! would run in it, and a write it was told is stored would never commit.

use std::process::Command;
use std::time::Duration;

use actiongate_store::*;
use sqlx::Connection;

use crate::backends::{open_node_with, pg_database};

/// Pids of the server processes serving database `db`, other than `me`.
async fn backends(admin: &mut sqlx::PgConnection, db: &str, me: i32) -> Vec<i32> {
    sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> $2")
        .bind(db)
        .bind(me)
        .fetch_all(admin)
        .await
        .unwrap()
}

fn signal(sig: &str, pids: &[i32]) {
    for pid in pids {
        let _ = Command::new("kill").arg(sig).arg(pid.to_string()).status();
    }
}

/// Resumes the paused backends however the test ends.
struct Resume(Vec<i32>);

impl Drop for Resume {
    fn drop(&mut self) {
        signal("-CONT", &self.0);
    }
}

fn action(n: usize, key: Option<&str>) -> NewAction {
    let decision = Decision {
        result: DecisionResult::Allow,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        idempotency_key: key.map(str::to_owned),
        ..NewAction::new("bot".into(), "bash".into(), format!("echo {n}"), decision)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_cut_off_while_it_begins_is_not_left_open_for_the_next_caller() {
    let Some(url) = pg_database() else {
        return;
    };
    let db = url.rsplit('/').next().unwrap().to_owned();
    let mut pg = PgOptions::new(&url);
    pg.connect_timeout = Duration::from_millis(500);
    pg.statement_timeout = Duration::from_millis(500);
    pg.max_connections = 2;
    let store = open_node_with(pg).await;
    store.insert_action(action(0, None)).await.unwrap();

    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let me: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    // Every connection the store holds now stops answering, so a call
    // with an idempotency key (a transaction) is cut off while its BEGIN
    // waits for an answer.
    let paused = backends(&mut admin, &db, me).await;
    assert!(!paused.is_empty());
    let resume = Resume(paused.clone());
    signal("-STOP", &paused);
    let cut = store.insert_action(action(1, Some("k1"))).await;
    assert!(cut.is_err(), "a call to a stalled server answered: {cut:?}");
    drop(resume);
    // The cut-off connection has had its answers by now.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Each write told it is stored is there for everyone else, at once.
    for n in 2..12 {
        let (a, created) = store.insert_action(action(n, None)).await.unwrap();
        assert!(created);
        let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM actions WHERE id = $1")
            .bind(&a.id)
            .fetch_one(&mut admin)
            .await
            .unwrap();
        assert_eq!(seen, 1, "write {n} was acknowledged but is not committed");
    }
    // And the cut-off request, retried with its key, is stored once.
    let (a1, _) = store.insert_action(action(1, Some("k1"))).await.unwrap();
    let (a2, again) = store.insert_action(action(1, Some("k1"))).await.unwrap();
    assert!(!again);
    assert_eq!(a1.id, a2.id);
}
