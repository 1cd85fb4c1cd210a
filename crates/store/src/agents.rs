//! Agents and their permission profiles.

use serde_json::Value;

use crate::SqliteStore;
use crate::error::StoreError;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::Agent;

macro_rules! agent_columns {
    () => {
        "id, name, profile, created_at, updated_at"
    };
}
pub(crate) use agent_columns;

pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<Agent, StoreError> {
    let profile: Option<String> = row.try_get("profile")?;
    Ok(Agent {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        profile: profile.map(|p| serde_json::from_str(&p)).transpose()?,
        created_at: from_ms(row.try_get("created_at")?),
        updated_at: from_ms(row.try_get("updated_at")?),
        warnings: Vec::new(),
    })
}

impl SqliteStore {
    /// Creates or replaces an agent; returns it and whether it was new.
    pub async fn put_agent(
        &self,
        id: &str,
        name: Option<String>,
        profile: Option<Value>,
    ) -> Result<(Agent, bool), StoreError> {
        let id = id.to_owned();
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let existed: Option<i64> =
                        sqlx::query_scalar("SELECT 1 FROM agents WHERE id = ?")
                            .bind(&id)
                            .fetch_optional(&mut *conn)
                            .await?;
                    let at = to_ms(now());
                    let row = sqlx::query(concat!("INSERT INTO agents (id, name, profile, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4) \
                         ON CONFLICT (id) DO UPDATE SET name = excluded.name, profile = excluded.profile, \
                         updated_at = excluded.updated_at RETURNING ", agent_columns!()))
                    .bind(&id)
                    .bind(&name)
                    .bind(profile.as_ref().map(Value::to_string))
                    .bind(at)
                    .fetch_one(conn)
                    .await?;
                    Ok((from_row(&row)?, existed.is_none()))
                })
            })
            .await
    }

    /// One agent, if registered.
    pub async fn get_agent(&self, id: &str) -> Result<Option<Agent>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Every registered agent, by id.
    pub async fn list_agents(&self) -> Result<Vec<Agent>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents ORDER BY id"
        ))
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(from_row).collect()
    }
}
