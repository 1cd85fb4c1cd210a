//! People (`docs/teams.md`): a name, groups, and the identities (operator
//! keys, chat user ids) a person decides through. Each identity belongs to
//! one person at most, which `person_identities` enforces.

use sqlx::SqliteConnection;

use crate::SqliteStore;
use crate::error::StoreError;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::teams::{ChatIds, Person};

/// A person about to be stored (created or replaced).
#[derive(Debug, Clone)]
pub struct NewPerson {
    /// Id (`per_…`).
    pub id: String,
    /// Unique name.
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Operator key ids.
    pub keys: Vec<String>,
    /// Chat identities.
    pub chat: ChatIds,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Body {
    groups: Vec<String>,
    keys: Vec<String>,
    chat: ChatIds,
}

impl NewPerson {
    /// The identities this person decides through, as a decision records
    /// them: `key:<id>`, `telegram:<user id>`, `slack:…`, `discord:…`,
    /// `whatsapp:…`.
    pub fn identities(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.keys.iter().map(|k| format!("key:{k}")).collect();
        let c = &self.chat;
        for (kind, v) in [
            ("telegram", &c.telegram),
            ("slack", &c.slack),
            ("discord", &c.discord),
            ("whatsapp", &c.whatsapp),
        ] {
            if let Some(v) = v {
                ids.push(format!("{kind}:{v}"));
            }
        }
        ids
    }

    pub(crate) fn body(&self) -> Result<String, StoreError> {
        Ok(serde_json::to_string(&Body {
            groups: self.groups.clone(),
            keys: self.keys.clone(),
            chat: self.chat.clone(),
        })?)
    }
}

pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<Person, StoreError> {
    let body: String = row.try_get("body")?;
    let body: Body = serde_json::from_str(&body)?;
    Ok(Person {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        groups: body.groups,
        keys: body.keys,
        chat: body.chat,
        created_at: from_ms(row.try_get("created_at")?),
        updated_at: from_ms(row.try_get("updated_at")?),
    })
}

/// The conflict an identity or name already taken becomes.
pub(crate) fn taken(what: &str) -> StoreError {
    StoreError::Conflict(format!(
        "{what} already belongs to another person (each name and identity belongs to one person)"
    ))
}

async fn put_on(
    conn: &mut SqliteConnection,
    p: &NewPerson,
    create: bool,
) -> Result<Person, StoreError> {
    let at = to_ms(now());
    let body = p.body()?;
    let row = if create {
        sqlx::query(
            "INSERT INTO people (id, name, body, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4) \
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
            "UPDATE people SET name = ?2, body = ?3, updated_at = ?4 WHERE id = ?1 \
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
    sqlx::query("DELETE FROM person_identities WHERE person_id = ?")
        .bind(&p.id)
        .execute(&mut *conn)
        .await?;
    for ident in p.identities() {
        sqlx::query("INSERT INTO person_identities (identity, person_id) VALUES (?, ?)")
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

impl SqliteStore {
    /// Creates (`create`) or replaces a person with their identities.
    pub async fn put_person(&self, p: NewPerson, create: bool) -> Result<Person, StoreError> {
        self.writer
            .run_sparing_grants(move |conn| Box::pin(async move { put_on(conn, &p, create).await }))
            .await
    }

    /// One person.
    pub async fn get_person(&self, id: &str) -> Result<Person, StoreError> {
        let row =
            sqlx::query("SELECT id, name, body, created_at, updated_at FROM people WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.read)
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
                .fetch_all(&self.read)
                .await?;
        rows.iter().map(from_row).collect()
    }

    /// Deletes a person and their identities.
    pub async fn delete_person(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    sqlx::query("DELETE FROM person_identities WHERE person_id = ?")
                        .bind(&id)
                        .execute(&mut *conn)
                        .await?;
                    let gone = sqlx::query("DELETE FROM people WHERE id = ?")
                        .bind(&id)
                        .execute(&mut *conn)
                        .await?;
                    if gone.rows_affected() == 0 {
                        return Err(StoreError::NotFound);
                    }
                    Ok(())
                })
            })
            .await
    }

    /// The person `identity` belongs to, if any.
    pub async fn person_of(&self, identity: &str) -> Result<Option<Person>, StoreError> {
        person_on(&self.read, identity).await
    }
}

/// The person `identity` belongs to, if any, read through `ex` (the read
/// pool, or the writer's connection inside a transaction).
pub(crate) async fn person_on<'e>(
    ex: impl sqlx::SqliteExecutor<'e>,
    identity: &str,
) -> Result<Option<Person>, StoreError> {
    let row = sqlx::query(
        "SELECT p.id, p.name, p.body, p.created_at, p.updated_at FROM person_identities i \
         JOIN people p ON p.id = i.person_id WHERE i.identity = ?",
    )
    .bind(identity)
    .fetch_optional(ex)
    .await?;
    row.as_ref().map(from_row).transpose()
}
