//! The conformance suite's two backends: each test written as
//! `async fn name(kind: Kind)` runs once on SQLite and once on Postgres
//! (a throwaway cluster, see `tests/support/pg_cluster.rs`).

use actiongate_store::{PgOptions, Store, StoreOptions};

#[path = "../../../tests/support/pg_cluster.rs"]
pub mod pg_cluster;

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// What keeps a test's database alive: its SQLite directory (Postgres
/// databases live as long as the cluster); and where it is, to open it
/// again ([`reopen`]).
pub struct Held(Option<tempfile::TempDir>, Option<String>);

/// A fresh, empty store on `kind` with `opts`; `None` when Postgres is not
/// installed (the test is then skipped, unless CI requires Postgres).
pub async fn open_with(kind: Kind, opts: StoreOptions) -> Option<(Store, Held)> {
    match kind {
        Kind::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(&dir.path().join("t.db"), opts).await.unwrap();
            Some((store, Held(Some(dir), None)))
        }
        Kind::Postgres => {
            let cluster = pg_cluster::Cluster::shared()?;
            let url = cluster.database();
            let store = Store::open_postgres(&PgOptions::new(&url), opts)
                .await
                .unwrap();
            Some((store, Held(None, Some(url))))
        }
    }
}

/// The database of `held` opened again (a restart of the daemon), with
/// the default options.
pub async fn reopen(held: &Held) -> Store {
    match held {
        Held(Some(dir), _) => Store::open(&dir.path().join("t.db"), StoreOptions::default())
            .await
            .unwrap(),
        Held(None, Some(url)) => open_node(url).await,
        Held(None, None) => unreachable!("every store is on a file or a database"),
    }
}

/// Runs `sql` (`sqlite_sql` on SQLite, `pg_sql` on Postgres) on the
/// database of `held` over a connection of its own.
pub async fn execute_raw(held: &Held, sqlite_sql: &'static str, pg_sql: &'static str) {
    use sqlx::Connection;
    match held {
        Held(Some(dir), _) => {
            let url = format!("sqlite://{}", dir.path().join("t.db").display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query(sqlite_sql).execute(&mut conn).await.unwrap();
        }
        Held(None, Some(url)) => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query(pg_sql).execute(&mut conn).await.unwrap();
        }
        Held(None, None) => unreachable!("every store is on a file or a database"),
    }
}

/// A connection of its own to the SQLite database of `held`; `None` on
/// Postgres.
pub async fn sqlite_conn(held: &Held) -> Option<sqlx::SqliteConnection> {
    use sqlx::Connection;
    let dir = held.0.as_ref()?;
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    Some(sqlx::SqliteConnection::connect(&url).await.unwrap())
}

/// The database of `held` opened again, or why not.
pub async fn try_reopen(held: &Held) -> Result<Store, actiongate_store::StoreError> {
    match held {
        Held(Some(dir), _) => Store::open(&dir.path().join("t.db"), StoreOptions::default()).await,
        Held(None, Some(url)) => {
            Store::open_postgres(&PgOptions::new(url), StoreOptions::default()).await
        }
        Held(None, None) => unreachable!("every store is on a file or a database"),
    }
}

/// [`open_with`] the default options.
pub async fn open(kind: Kind) -> Option<(Store, Held)> {
    open_with(kind, StoreOptions::default()).await
}

/// For each `name`, the tests `name::sqlite` and `name::postgres`, calling
/// `name(Kind::...)`.
#[macro_export]
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::backends::Kind::Sqlite).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::backends::Kind::Postgres).await;
                }
            }
        )*
    };
}

/// A new empty Postgres database's URL, for tests that open several stores
/// on one database (several nodes); `None` without Postgres.
pub fn pg_database() -> Option<String> {
    Some(pg_cluster::Cluster::shared()?.database())
}

/// A store on the Postgres database at `url`, as one more node.
pub async fn open_node(url: &str) -> Store {
    open_node_with(PgOptions::new(url)).await
}

/// A store on the Postgres database of `pg`, as one more node.
pub async fn open_node_with(pg: PgOptions) -> Store {
    Store::open_postgres(&pg, StoreOptions::default())
        .await
        .unwrap()
}
