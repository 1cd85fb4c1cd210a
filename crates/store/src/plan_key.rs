//! A plan asked again under its idempotency key (an agent retrying after a
//! lost answer or a 503) is the plan the first request made, not a second
//! one for a human to decide: see [`crate::RequestKey`]. The key is unique
//! per agent (`plans_idempotency`).

use sqlx::QueryBuilder;

use crate::error::StoreError;
use crate::plans::{plan_columns, plan_from_row};
use crate::request_key::RequestKey;
use crate::row::Cols;
use actiongate_api::sessions::Plan;

/// The plan `agent` asked for under `key`, with the hash of its request.
pub(crate) fn keyed_query<DB>(agent: &str, key: &RequestKey) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let select = concat!(
        "SELECT request_hash, ",
        plan_columns!(),
        " FROM plans WHERE agent = "
    );
    crate::request_key::keyed_query(select, agent, key)
}

/// The plan a row read by [`keyed_query`] holds, when the request under
/// `key` is the one that made it; a conflict when it is another.
pub(crate) fn found(row: &impl Cols, key: &RequestKey) -> Result<Plan, StoreError> {
    key.same_request(row.try_get("request_hash")?, "plan")?;
    plan_from_row(row)
}

/// The statement storing a pending plan; with a key, one stored under it
/// already makes it do nothing (no row affected) instead of failing.
pub(crate) fn insert_query<DB>(
    plan: &Plan,
    key: Option<&RequestKey>,
) -> Result<QueryBuilder<DB>, StoreError>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<String>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> = QueryBuilder::new(
        "INSERT INTO plans (id, agent, session, reason, status, steps, created_at, \
         idempotency_key, request_hash) VALUES (",
    );
    q.separated(", ")
        .push_bind(plan.id.clone())
        .push_bind(plan.agent.clone())
        .push_bind(plan.session.clone())
        .push_bind(plan.reason.clone())
        .push_bind("pending".to_owned())
        .push_bind(serde_json::to_string(&plan.steps)?)
        .push_bind(crate::time::to_ms(plan.created_at))
        .push_bind(key.map(|k| k.key.clone()))
        .push_bind(key.map(|k| k.request_hash.clone()));
    q.push(")");
    if key.is_some() {
        q.push(
            " ON CONFLICT (agent, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
        );
    }
    Ok(q)
}
