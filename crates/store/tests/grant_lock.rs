//! On Postgres, grants that allow only later actions (for a session or a
//! count of uses) take no part in the lock that orders grants against
//! pending actions: a burst of them across daemons used to queue behind
//! one another for seconds, and time out. A standing grant still waits.

use std::time::{Duration, Instant};

use actiongate_store::*;

use crate::backends::{open_node_with, pg_database};

fn grant(session: Option<&str>, uses: Option<i64>) -> NewGrant {
    NewGrant {
        session: session.map(str::to_owned),
        uses,
        id: uuid::Uuid::now_v7().to_string(),
        agent: Some("a".to_owned()),
        target: NewGrantTarget::Tool {
            tool: "bash".to_owned(),
            pattern: "make .*".to_owned(),
            whole_line: false,
        },
        granted_by: "op".to_owned(),
        expires_at: None,
        note: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_and_counted_grants_do_not_wait_for_the_grants_lock() {
    use sqlx::{Connection, Executor};
    let Some(url) = pg_database() else {
        return;
    };
    let mut pg = PgOptions::new(&url);
    pg.statement_timeout = Duration::from_millis(1500);
    let store = open_node_with(pg).await;
    // Another node's grant holds the lock, for longer than a statement may
    // wait.
    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    other.execute("BEGIN").await.unwrap();
    other
        .execute("SELECT pg_advisory_xact_lock(hashtext('actiongate.grants'))")
        .await
        .unwrap();

    let t = Instant::now();
    for (session, uses) in [(Some("s1"), None), (None, Some(3)), (Some("s2"), Some(1))] {
        let made = store.create_grant(grant(session, uses), None).await;
        let made = made.unwrap_or_else(|e| panic!("{session:?} {uses:?}: {e:?}"));
        assert_eq!(made.grant.session.as_deref(), session);
    }
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );

    // A standing grant approves pending actions it covers: it still waits
    // its turn (and here, held past the statement timeout, gives up).
    let standing = store.create_grant(grant(None, None), None).await;
    assert!(matches!(standing, Err(StoreError::Busy)), "{standing:?}");
    other.execute("ROLLBACK").await.unwrap();
    store.create_grant(grant(None, None), None).await.unwrap();
    store.close().await;
}
