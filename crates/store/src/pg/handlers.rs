//! Registered handlers and their webhook secrets on Postgres. Each change
//! is one statement, so two nodes changing one handler at once apply one
//! after the other; none writes an event (as on SQLite). Registrations
//! take turns across daemons (an advisory lock), each checked against the
//! others' tool names in its transaction.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;

use crate::dispatch::{HandlerSecrets, SecretCols};
use crate::error::StoreError;
use crate::handlers::{NewHandler, check_tool_names, from_row, handler_columns, page_query, taken};
use crate::pg::Postgres;
use crate::time::{now, to_ms};
use actiongate_api::model::HandlerRecord;

impl Postgres {
    /// Runs one change that returns a handler row, in a transaction of its
    /// own (after checking the tool names of `new`, a registration);
    /// `NotFound` when it changed none.
    async fn change_handler<'q>(
        &self,
        new: Option<&NewHandler>,
        q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<HandlerRecord, StoreError> {
        let mut tx = self.begin().await?;
        if let Some(h) = new {
            self.check_tool_names_on(&mut tx, h).await?;
        }
        let row: Option<PgRow> = q.fetch_optional(&mut *tx).await?;
        let handler = row
            .as_ref()
            .map(from_row)
            .transpose()?
            .ok_or(StoreError::NotFound)?;
        self.commit(tx, Vec::new()).await?;
        Ok(handler)
    }

    /// Registers a new handler with its secret; an existing id (even a
    /// retired one, whose history stays) is a conflict.
    pub async fn create_handler(
        &self,
        h: NewHandler,
        secret: String,
    ) -> Result<HandlerRecord, StoreError> {
        let at = to_ms(now());
        let mut tx = self.begin().await?;
        self.check_tool_names_on(&mut tx, &h).await?;
        let row = sqlx::query(concat!(
            "INSERT INTO handlers (id, name, description, url, timeout_ms, spec, secret, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING ",
            handler_columns!()
        ))
        .bind(&h.id)
        .bind(&h.name)
        .bind(&h.description)
        .bind(&h.url)
        .bind(h.timeout_ms)
        .bind(h.spec.to_string())
        .bind(&secret)
        .bind(at)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| taken(&h.id, e))?;
        let handler = from_row(&row)?;
        self.commit(tx, Vec::new()).await?;
        Ok(handler)
    }

    /// Replaces a live handler's registration, keeping its secret.
    pub async fn replace_handler(&self, h: NewHandler) -> Result<HandlerRecord, StoreError> {
        self.change_handler(
            Some(&h),
            sqlx::query(concat!(
                "UPDATE handlers SET name = $1, description = $2, url = $3, timeout_ms = $4, spec = $5, \
                 updated_at = $6 WHERE id = $7 AND retired_at IS NULL RETURNING ",
                handler_columns!()
            ))
            .bind(&h.name)
            .bind(&h.description)
            .bind(&h.url)
            .bind(h.timeout_ms)
            .bind(h.spec.to_string())
            .bind(to_ms(now()))
            .bind(&h.id),
        )
        .await
    }

    /// [`check_tool_names`] in `tx`, registrations taking turns on every
    /// daemon (an advisory lock held until `tx` ends).
    async fn check_tool_names_on(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
        h: &NewHandler,
    ) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('actiongate.handlers'))")
            .execute(&mut **tx)
            .await?;
        let others: Vec<(String, String)> =
            sqlx::query_as("SELECT id, spec FROM handlers WHERE retired_at IS NULL AND id <> $1")
                .bind(&h.id)
                .fetch_all(&mut **tx)
                .await?;
        check_tool_names(h, &others)
    }

    /// Retires a handler: no new actions; its history stays readable.
    pub async fn retire_handler(&self, id: &str) -> Result<HandlerRecord, StoreError> {
        self.change_handler(
            None,
            sqlx::query(concat!(
                "UPDATE handlers SET retired_at = COALESCE(retired_at, $1) WHERE id = $2 RETURNING ",
                handler_columns!()
            ))
            .bind(to_ms(now()))
            .bind(id.to_owned()),
        )
        .await
    }

    /// One handler, retired or not.
    pub async fn get_handler(&self, id: &str) -> Result<HandlerRecord, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            handler_columns!(),
            " FROM handlers WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref()
            .map(from_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    /// Every handler, by id; retired ones only when asked.
    pub async fn list_handlers(
        &self,
        include_retired: bool,
    ) -> Result<Vec<HandlerRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            handler_columns!(),
            " FROM handlers WHERE $1 OR retired_at IS NULL ORDER BY id"
        ))
        .bind(include_retired)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// A page of handlers by id: those after `page.after`, at most
    /// `page.limit`; retired ones only when asked.
    pub async fn handlers_page(
        &self,
        include_retired: bool,
        page: &crate::Page,
    ) -> Result<Vec<HandlerRecord>, StoreError> {
        let rows = page_query::<sqlx::Postgres>(include_retired, page)
            .build()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(from_row).collect()
    }

    /// The webhook secret of a handler.
    pub async fn handler_secret(&self, id: &str) -> Result<String, StoreError> {
        sqlx::query_scalar("SELECT secret FROM handlers WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(StoreError::NotFound)
    }

    /// Replaces a handler's secret; the old one stays valid until
    /// `grace_until`. Two rotations at once (on two nodes) apply one after
    /// the other: the second keeps the first's secret as the previous one.
    pub async fn rotate_handler_secret(
        &self,
        id: &str,
        secret: String,
        grace_until: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let done = sqlx::query(
            "UPDATE handlers SET previous_secret = secret, previous_secret_until = $1, secret = $2, \
             updated_at = $3 WHERE id = $4 AND retired_at IS NULL",
        )
        .bind(to_ms(grace_until))
        .bind(&secret)
        .bind(to_ms(now()))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.commit(tx, Vec::new()).await?;
        Ok(())
    }

    /// A handler's secrets: the current one and the rotated-out one with
    /// the end of its grace period.
    pub async fn handler_secret_set(&self, id: &str) -> Result<HandlerSecrets, StoreError> {
        let cols: SecretCols = sqlx::query_as(
            "SELECT secret, previous_secret, previous_secret_until FROM handlers WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::NotFound)?;
        Ok(HandlerSecrets::from(cols))
    }

    /// A handler's valid secrets: the current one first, then the previous
    /// one while its grace period lasts.
    pub async fn handler_secrets(&self, id: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.handler_secret_set(id).await?.valid_at(now()))
    }
}
