//! People on Postgres (see `crate::people`).

use sqlx::PgConnection;

use crate::error::StoreError;
use crate::people::{NewPerson, from_row, taken};
use crate::pg::Postgres;
use crate::time::{now, to_ms};
use actiongate_api::teams::Person;

async fn put_on(
    conn: &mut PgConnection,
    p: &NewPerson,
    create: bool,
) -> Result<Person, StoreError> {
    let at = to_ms(now());
    let body = p.body()?;
    let row = if create {
        sqlx::query(
            "INSERT INTO people (id, name, body, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) \
             RETURNING id, name, body, created_at, updated_at",
        )
        .bind(&p.id)
        .bind(&p.name)
        .bind(&body)
        .bind(at)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| match StoreError::from(e) {
            StoreError::Conflict(_) => taken(&format!("the name '{}'", p.name)),
            e => e,
        })?
    } else {
        sqlx::query(
            "UPDATE people SET name = $2, body = $3, updated_at = $4 WHERE id = $1 \
             RETURNING id, name, body, created_at, updated_at",
        )
        .bind(&p.id)
        .bind(&p.name)
        .bind(&body)
        .bind(at)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| match StoreError::from(e) {
            StoreError::Conflict(_) => taken(&format!("the name '{}'", p.name)),
            e => e,
        })?
        .ok_or(StoreError::NotFound)?
    };
    sqlx::query("DELETE FROM person_identities WHERE person_id = $1")
        .bind(&p.id)
        .execute(&mut *conn)
        .await?;
    for ident in p.identities() {
        sqlx::query("INSERT INTO person_identities (identity, person_id) VALUES ($1, $2)")
            .bind(&ident)
            .bind(&p.id)
            .execute(&mut *conn)
            .await
            .map_err(|e| match StoreError::from(e) {
                StoreError::Conflict(_) => taken(&format!("the identity '{ident}'")),
                e => e,
            })?;
    }
    from_row(&row)
}

impl Postgres {
    /// Creates (`create`) or replaces a person with their identities.
    pub async fn put_person(&self, p: NewPerson, create: bool) -> Result<Person, StoreError> {
        let mut tx = self.begin().await?;
        let person = put_on(&mut tx, &p, create).await?;
        self.commit(tx, Vec::new()).await?;
        Ok(person)
    }

    /// One person.
    pub async fn get_person(&self, id: &str) -> Result<Person, StoreError> {
        let row =
            sqlx::query("SELECT id, name, body, created_at, updated_at FROM people WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.as_ref()
            .map(from_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    /// Every person, by name.
    pub async fn list_people(&self) -> Result<Vec<Person>, StoreError> {
        let rows =
            sqlx::query("SELECT id, name, body, created_at, updated_at FROM people ORDER BY name")
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(from_row).collect()
    }

    /// Deletes a person and their identities.
    pub async fn delete_person(&self, id: &str) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM person_identities WHERE person_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let gone = sqlx::query("DELETE FROM people WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if gone.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.commit(tx, Vec::new()).await?;
        Ok(())
    }

    /// The person `identity` belongs to, if any.
    pub async fn person_of(&self, identity: &str) -> Result<Option<Person>, StoreError> {
        person_on(&self.pool, identity, false).await
    }
}

/// The person `identity` belongs to, if any, read through `ex`; with
/// `share`, its rows share-locked until the transaction ends (a change in
/// flight is waited for, a later one waits for this commit).
pub(crate) async fn person_on<'e>(
    ex: impl sqlx::PgExecutor<'e>,
    identity: &str,
    share: bool,
) -> Result<Option<Person>, StoreError> {
    const SQL: &str = "SELECT p.id, p.name, p.body, p.created_at, p.updated_at \
        FROM person_identities i JOIN people p ON p.id = i.person_id WHERE i.identity = $1";
    const SHARED: &str = "SELECT p.id, p.name, p.body, p.created_at, p.updated_at \
        FROM person_identities i JOIN people p ON p.id = i.person_id WHERE i.identity = $1 \
        FOR SHARE";
    let row = sqlx::query(if share { SHARED } else { SQL })
        .bind(identity)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(from_row).transpose()
}
