//! Agents and their profiles on Postgres.

use serde_json::Value;

use crate::agents::{agent_columns, from_row};
use crate::error::StoreError;
use crate::pg::Postgres;
use crate::time::{now, to_ms};
use actiongate_api::model::Agent;

impl Postgres {
    /// Creates or replaces an agent; returns it and whether it was new.
    pub async fn put_agent(
        &self,
        id: &str,
        name: Option<String>,
        profile: Option<Value>,
    ) -> Result<(Agent, bool), StoreError> {
        let mut tx = self.begin().await?;
        // `xmax = 0` only for a row this statement inserted.
        let row = sqlx::query(concat!(
            "INSERT INTO agents (id, name, profile, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, profile = excluded.profile, \
             updated_at = excluded.updated_at RETURNING CASE WHEN xmax = 0 THEN 1::BIGINT ELSE 0::BIGINT END AS inserted, ",
            agent_columns!()
        ))
        .bind(id)
        .bind(&name)
        .bind(profile.as_ref().map(Value::to_string))
        .bind(to_ms(now()))
        .fetch_one(&mut *tx)
        .await?;
        let inserted: i64 = sqlx::Row::try_get(&row, "inserted")?;
        let agent = from_row(&row)?;
        self.commit(tx, Vec::new()).await?;
        Ok((agent, inserted != 0))
    }

    /// One agent, if registered.
    pub async fn get_agent(&self, id: &str) -> Result<Option<Agent>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
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
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }
}
