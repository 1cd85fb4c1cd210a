//! Who a decision's approver checks read: the person each identity
//! belonged to (their name and groups), as the gate read it before the
//! decision's transaction. The transaction reads them again under its lock
//! and refuses the decision when any differs, so an approval is never
//! counted under a membership that was changed while it was checked (a
//! person removed from the approvers' group, an identity moved to someone
//! else) and answered first.

use sqlx::SqliteConnection;

use crate::error::StoreError;
use actiongate_api::teams::Person;

/// One identity and the person it belonged to when the gate checked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonSeen {
    /// The identity (`key:<id>`, `slack:<user id>`, …).
    pub identity: String,
    /// The person's id, name and groups; `None`: nobody's.
    pub person: Option<(String, String, Vec<String>)>,
}

impl PersonSeen {
    /// `identity` as belonging to `person` (read now).
    pub fn of(identity: &str, person: Option<&Person>) -> PersonSeen {
        PersonSeen {
            identity: identity.to_owned(),
            person: person.map(|p| (p.id.clone(), p.name.clone(), p.groups.clone())),
        }
    }
}

/// Refuses (409) when the person of any of `seen` is not as seen: read
/// `now` for each under the transaction's lock.
pub(crate) fn unchanged(seen: &PersonSeen, now: Option<&Person>) -> Result<(), StoreError> {
    if PersonSeen::of(&seen.identity, now) == *seen {
        return Ok(());
    }
    Err(StoreError::Conflict(format!(
        "who {} is, or their groups, changed while this decision was made: read the action \
         again and decide",
        seen.identity
    )))
}

/// [`unchanged`] for each of `seen`, read on SQLite's one writer
/// connection (nothing commits in between).
pub(crate) async fn check_on(
    conn: &mut SqliteConnection,
    seen: &[PersonSeen],
) -> Result<(), StoreError> {
    for s in seen {
        let now = crate::people::person_on(&mut *conn, &s.identity).await?;
        unchanged(s, now.as_ref())?;
    }
    Ok(())
}
