//! Registered handlers: their spec as registered and their webhook secret.

use serde_json::Value;
use sqlx::{QueryBuilder, SqliteConnection};

use crate::error::StoreError;
use crate::time::{from_ms, now, opt_from_ms, to_ms};
use crate::{Page, SqliteStore};
use actiongate_api::model::HandlerRecord;

/// A handler to register or replace.
#[derive(Debug, Clone)]
pub struct NewHandler {
    /// Slug id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// Webhook URL.
    pub url: String,
    /// Per-attempt timeout.
    pub timeout_ms: Option<i64>,
    /// `{permissions, actions}`.
    pub spec: Value,
}

/// The names of the actions in a stored spec, by index.
fn action_names(spec: &Value) -> impl Iterator<Item = (usize, &str)> {
    let actions = spec.get("actions").and_then(Value::as_array);
    actions
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, a)| Some((i, a.get("name")?.as_str()?)))
}

/// Refuses `h` when an action of it would be listed under the MCP tool
/// name ([`actiongate_api::tool_name`]) of an action of another handler
/// in service (`others`: id and stored spec): a call of that name would
/// reach one of them with the params meant for the other. Checked in the
/// transaction that stores `h`, with registrations one at a time (SQLite:
/// the one writer; Postgres: an advisory lock), so two that clash, sent
/// at once through one daemon or two, are not both stored.
pub(crate) fn check_tool_names(
    h: &NewHandler,
    others: &[(String, String)],
) -> Result<(), StoreError> {
    let mut taken = Vec::new();
    for (id, spec) in others {
        let spec: Value = serde_json::from_str(spec)?;
        for (_, name) in action_names(&spec) {
            taken.push((
                actiongate_api::tool_name(id, name),
                id.clone(),
                name.to_owned(),
            ));
        }
    }
    let clashes: Vec<(String, String)> = action_names(&h.spec)
        .filter_map(|(i, name)| {
            let tool = actiongate_api::tool_name(&h.id, name);
            let (_, handler, action) = taken.iter().find(|(n, _, _)| *n == tool)?;
            Some((
                format!("actions[{i}].name"),
                format!(
                    "its MCP tool name '{tool}' is already handler '{handler}''s action '{action}'"
                ),
            ))
        })
        .collect();
    if clashes.is_empty() {
        Ok(())
    } else {
        Err(StoreError::NamesTaken(clashes))
    }
}

/// [`check_tool_names`] on the writer's connection, against the handlers
/// in service as stored.
async fn check_tool_names_on(
    conn: &mut SqliteConnection,
    h: &NewHandler,
) -> Result<(), StoreError> {
    let others: Vec<(String, String)> =
        sqlx::query_as("SELECT id, spec FROM handlers WHERE retired_at IS NULL AND id <> ?")
            .bind(&h.id)
            .fetch_all(conn)
            .await?;
    check_tool_names(h, &others)
}

/// The handler columns, in the order [`from_row`] reads them, as a literal
/// for `concat!`.
macro_rules! handler_columns {
    () => {
        "id, name, description, url, timeout_ms, spec, created_at, updated_at, retired_at"
    };
}
pub(crate) use handler_columns;

/// The query of a page of handlers by id (see [`SqliteStore::handlers_page`]).
pub(crate) fn page_query<DB>(include_retired: bool, page: &Page) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> = QueryBuilder::new(concat!(
        "SELECT ",
        handler_columns!(),
        " FROM handlers WHERE TRUE"
    ));
    if !include_retired {
        q.push(" AND retired_at IS NULL");
    }
    // Always by id, ascending: the order `GET /v1/handlers` has always had.
    crate::paging::by_id(&mut q, page.after.as_deref(), page.limit, true);
    q
}

pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<HandlerRecord, StoreError> {
    let spec: String = row.try_get("spec")?;
    Ok(HandlerRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        url: row.try_get("url")?,
        timeout_ms: row.try_get("timeout_ms")?,
        spec: serde_json::from_str(&spec)?,
        created_at: from_ms(row.try_get("created_at")?),
        updated_at: from_ms(row.try_get("updated_at")?),
        retired_at: opt_from_ms(row.try_get("retired_at")?),
    })
}

/// `e`, an insert of handler `id` failing, as the caller sees it: a
/// unique violation means the id is taken.
pub(crate) fn taken(id: &str, e: sqlx::Error) -> StoreError {
    match StoreError::from(e) {
        StoreError::Conflict(_) => StoreError::Conflict(format!("handler '{id}' already exists")),
        other => other,
    }
}

impl SqliteStore {
    /// Registers a new handler with its secret; an existing id (even a
    /// retired one, whose history stays) is a conflict.
    pub async fn create_handler(
        &self,
        h: NewHandler,
        secret: String,
    ) -> Result<HandlerRecord, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    check_tool_names_on(&mut *conn, &h).await?;
                    let at = to_ms(now());
                    let row = sqlx::query(concat!(
                        "INSERT INTO handlers (id, name, description, url, timeout_ms, spec, secret, created_at, updated_at) \
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ",
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
                    .bind(at)
                    .fetch_one(conn)
                    .await
                    .map_err(|e| taken(&h.id, e))?;
                    from_row(&row)
                })
            })
            .await
    }

    /// Replaces a live handler's registration, keeping its secret.
    pub async fn replace_handler(&self, h: NewHandler) -> Result<HandlerRecord, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    check_tool_names_on(&mut *conn, &h).await?;
                    let row = sqlx::query(concat!(
                        "UPDATE handlers SET name = ?, description = ?, url = ?, timeout_ms = ?, spec = ?, updated_at = ? \
                         WHERE id = ? AND retired_at IS NULL RETURNING ",
                        handler_columns!()
                    ))
                    .bind(&h.name)
                    .bind(&h.description)
                    .bind(&h.url)
                    .bind(h.timeout_ms)
                    .bind(h.spec.to_string())
                    .bind(to_ms(now()))
                    .bind(&h.id)
                    .fetch_optional(conn)
                    .await?;
                    row.as_ref().map(from_row).transpose()?.ok_or(StoreError::NotFound)
                })
            })
            .await
    }

    /// Retires a handler: no new actions; its history stays readable.
    pub async fn retire_handler(&self, id: &str) -> Result<HandlerRecord, StoreError> {
        let id = id.to_owned();
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let row = sqlx::query(concat!(
                        "UPDATE handlers SET retired_at = COALESCE(retired_at, ?) WHERE id = ? RETURNING ",
                        handler_columns!()
                    ))
                    .bind(to_ms(now()))
                    .bind(&id)
                    .fetch_optional(conn)
                    .await?;
                    row.as_ref().map(from_row).transpose()?.ok_or(StoreError::NotFound)
                })
            })
            .await
    }

    /// One handler, retired or not.
    pub async fn get_handler(&self, id: &str) -> Result<HandlerRecord, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            handler_columns!(),
            " FROM handlers WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.read)
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
        let rows = if include_retired {
            sqlx::query(concat!(
                "SELECT ",
                handler_columns!(),
                " FROM handlers ORDER BY id"
            ))
            .fetch_all(&self.read)
            .await?
        } else {
            sqlx::query(concat!(
                "SELECT ",
                handler_columns!(),
                " FROM handlers WHERE retired_at IS NULL ORDER BY id"
            ))
            .fetch_all(&self.read)
            .await?
        };
        rows.iter().map(from_row).collect()
    }

    /// A page of handlers by id: those after `page.after`, at most
    /// `page.limit`; retired ones only when asked.
    pub async fn handlers_page(
        &self,
        include_retired: bool,
        page: &Page,
    ) -> Result<Vec<HandlerRecord>, StoreError> {
        let rows = page_query::<sqlx::Sqlite>(include_retired, page)
            .build()
            .fetch_all(&self.read)
            .await?;
        rows.iter().map(from_row).collect()
    }

    /// The webhook secret of a handler.
    pub async fn handler_secret(&self, id: &str) -> Result<String, StoreError> {
        sqlx::query_scalar("SELECT secret FROM handlers WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.read)
            .await?
            .ok_or(StoreError::NotFound)
    }
}
