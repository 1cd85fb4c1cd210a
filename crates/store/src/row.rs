//! Reading a column the same way from a SQLite or a Postgres row, so that
//! both backends turn rows into records with the same code.
//!
//! Both schemas keep text as TEXT and every number as a 64-bit integer, so
//! a column is one of four shapes: text or integer, nullable or not.

use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

/// A row of either backend.
pub(crate) trait Cols {
    /// A text column (`None` when NULL).
    fn text(&self, col: &str) -> Result<Option<String>, sqlx::Error>;
    /// An integer column (`None` when NULL).
    fn int(&self, col: &str) -> Result<Option<i64>, sqlx::Error>;

    /// A column decoded as `T` (`String`, `i64`, or either as `Option`).
    fn try_get<T: Col>(&self, col: &str) -> Result<T, sqlx::Error>
    where
        Self: Sized,
    {
        T::read(self, col)
    }
}

/// A Rust type a column is read as.
pub(crate) trait Col: Sized {
    /// Reads `col` from `row`.
    fn read<R: Cols>(row: &R, col: &str) -> Result<Self, sqlx::Error>;
}

fn null(col: &str) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_owned(),
        source: "unexpected NULL".into(),
    }
}

impl Col for String {
    fn read<R: Cols>(row: &R, col: &str) -> Result<Self, sqlx::Error> {
        row.text(col)?.ok_or_else(|| null(col))
    }
}

impl Col for Option<String> {
    fn read<R: Cols>(row: &R, col: &str) -> Result<Self, sqlx::Error> {
        row.text(col)
    }
}

impl Col for i64 {
    fn read<R: Cols>(row: &R, col: &str) -> Result<Self, sqlx::Error> {
        row.int(col)?.ok_or_else(|| null(col))
    }
}

impl Col for Option<i64> {
    fn read<R: Cols>(row: &R, col: &str) -> Result<Self, sqlx::Error> {
        row.int(col)
    }
}

impl Col for bool {
    fn read<R: Cols>(row: &R, col: &str) -> Result<Self, sqlx::Error> {
        Ok(i64::read(row, col)? != 0)
    }
}

impl Cols for SqliteRow {
    fn text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        Row::try_get(self, col)
    }
    fn int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        Row::try_get(self, col)
    }
}

impl Cols for PgRow {
    fn text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        Row::try_get(self, col)
    }
    fn int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        Row::try_get(self, col)
    }
}
