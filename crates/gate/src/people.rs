//! People (`docs/teams.md`): who an operator key or a chat identity
//! belongs to, kept by admins; and who is deciding, as approver rules and
//! quorums see them.

use actiongate_api::teams::{ChatIds, Person, PersonBody};
use actiongate_store::{ApiKey, NewPerson, PersonSeen, Role, StoreError};

use crate::{Caller, Gate, GateError, GateResult};

/// Most groups, and most keys, of one person.
const MAX_LIST: usize = 32;

/// Who is deciding: the person an identity belongs to, or the identity
/// itself when it is nobody's.
#[derive(Debug, Clone)]
pub struct Decider {
    /// The person's name, or the identity (`key:<id>`, `telegram:<id>`).
    pub who: String,
    /// The identity the decision came through.
    pub by: String,
    /// Names approver globs match: the person's name, the key's name.
    pub names: Vec<String>,
    /// The person's groups.
    pub groups: Vec<String>,
    /// Whether the identity is a person's: only people count toward a
    /// quorum of more than one.
    pub person: bool,
    /// The person as read for these checks: the decision's transaction
    /// refuses it when they changed since.
    pub seen: PersonSeen,
}

fn name_ok(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
}

fn digits(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

fn check_chat(chat: &ChatIds) -> GateResult<()> {
    if let Some(t) = &chat.telegram
        && !digits(t, 1, 20)
    {
        return Err(GateError::invalid(
            "chat.telegram",
            "a numeric Telegram user id",
        ));
    }
    if let Some(s) = &chat.slack
        && !(s.len() <= 32
            && !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()))
    {
        return Err(GateError::invalid(
            "chat.slack",
            "a Slack user id: 1-32 of A-Z and 0-9, e.g. U012ABCDEF",
        ));
    }
    if let Some(d) = &chat.discord
        && !digits(d, 1, 20)
    {
        return Err(GateError::invalid(
            "chat.discord",
            "a numeric Discord user id",
        ));
    }
    if let Some(w) = &chat.whatsapp
        && !digits(w, 6, 15)
    {
        return Err(GateError::invalid(
            "chat.whatsapp",
            "a WhatsApp number: 6-15 digits, country code first, no +",
        ));
    }
    Ok(())
}

impl Gate {
    async fn checked_person(&self, id: String, body: PersonBody) -> GateResult<NewPerson> {
        if !name_ok(&body.name, 64) {
            return Err(GateError::invalid(
                "name",
                "1-64 characters from A-Z a-z 0-9 _ - . @",
            ));
        }
        if body.groups.len() > MAX_LIST {
            return Err(GateError::invalid("groups", "at most 32 groups"));
        }
        for (i, g) in body.groups.iter().enumerate() {
            if !name_ok(g, 64) {
                return Err(GateError::invalid(
                    format!("groups[{i}]"),
                    "1-64 characters from A-Z a-z 0-9 _ - . @",
                ));
            }
        }
        if body.keys.len() > MAX_LIST {
            return Err(GateError::invalid("keys", "at most 32 keys"));
        }
        let keys = self.store().list_keys().await?;
        for (i, k) in body.keys.iter().enumerate() {
            if body.keys[..i].contains(k) {
                return Err(GateError::invalid(
                    format!("keys[{i}]"),
                    "listed twice: each key once",
                ));
            }
            match keys.iter().find(|key| &key.id == k) {
                Some(key) if key.agent.is_none() && key.role >= Role::Operator => {}
                Some(_) => {
                    return Err(GateError::invalid(
                        format!("keys[{i}]"),
                        "not an operator key: a person decides with operator or admin keys bound to no agent",
                    ));
                }
                None => {
                    return Err(GateError::invalid(format!("keys[{i}]"), "no such key"));
                }
            }
        }
        check_chat(&body.chat)?;
        Ok(NewPerson {
            id,
            name: body.name,
            groups: body.groups,
            keys: body.keys,
            chat: body.chat,
        })
    }

    /// Adds a person (admins).
    pub async fn create_person(&self, caller: &Caller, body: PersonBody) -> GateResult<Person> {
        caller.require(Role::Admin)?;
        let id = format!("per_{}", uuid::Uuid::now_v7().simple());
        let new = self.checked_person(id, body).await?;
        let person = self.store().put_person(new, true).await?;
        self.people_changed();
        Ok(person)
    }

    /// Replaces person `id` (admins).
    pub async fn replace_person(
        &self,
        caller: &Caller,
        id: &str,
        body: PersonBody,
    ) -> GateResult<Person> {
        caller.require(Role::Admin)?;
        let new = self.checked_person(id.to_owned(), body).await?;
        let person = self
            .store()
            .put_person(new, false)
            .await
            .map_err(|e| not_found(e, id))?;
        self.people_changed();
        Ok(person)
    }

    /// One person (admins).
    pub async fn get_person(&self, caller: &Caller, id: &str) -> GateResult<Person> {
        caller.require(Role::Admin)?;
        self.store()
            .get_person(id)
            .await
            .map_err(|e| not_found(e, id))
    }

    /// Every person (admins).
    pub async fn list_people(&self, caller: &Caller) -> GateResult<Vec<Person>> {
        caller.require(Role::Admin)?;
        Ok(self.store().list_people().await?)
    }

    /// Removes person `id` (admins); their keys and chat identities decide
    /// as themselves from then on.
    pub async fn delete_person(&self, caller: &Caller, id: &str) -> GateResult<()> {
        caller.require(Role::Admin)?;
        self.store()
            .delete_person(id)
            .await
            .map_err(|e| not_found(e, id))?;
        self.people_changed();
        Ok(())
    }

    /// Who `caller` is as a decider: the person their identity belongs to,
    /// or the identity itself. The names approver globs match are the
    /// person's and, for a key, the key's: never an identity string
    /// (`telegram:…`, `key:…`), which a glob meant for names (`t*`, `k*`)
    /// would match for anyone deciding through that chat or any key.
    pub async fn decider(&self, caller: &Caller) -> GateResult<Decider> {
        let by = caller.identity();
        let person = self.store().person_of(&by).await?;
        let seen = PersonSeen::of(&by, person.as_ref());
        let mut names = match caller.via {
            None => vec![caller.name.clone()],
            Some(_) => Vec::new(),
        };
        Ok(match person {
            Some(p) => {
                names.push(p.name.clone());
                Decider {
                    who: p.name,
                    by,
                    names,
                    groups: p.groups,
                    person: true,
                    seen,
                }
            }
            None => Decider {
                who: by.clone(),
                by,
                names,
                groups: Vec::new(),
                person: false,
                seen,
            },
        })
    }

    /// Who approved through identity `by`, as things stand now: the person
    /// it belongs to, with the names approver globs match (theirs and, for
    /// a key, the key's). `None` when it is nobody's now, or a key that
    /// was revoked: such an approval no longer counts (`keys`: every key,
    /// revoked ones too).
    pub(crate) async fn decider_now(
        &self,
        by: &str,
        keys: &[ApiKey],
    ) -> GateResult<Option<Decider>> {
        let mut names = match by.strip_prefix("key:") {
            Some(id) => match keys.iter().find(|k| k.id == id) {
                Some(k) if k.revoked_at.is_none() => vec![k.name.clone()],
                _ => return Ok(None),
            },
            None => Vec::new(),
        };
        Ok(self.store().person_of(by).await?.map(|p| {
            names.push(p.name.clone());
            Decider {
                seen: PersonSeen::of(by, Some(&p)),
                who: p.name,
                by: by.to_owned(),
                names,
                groups: p.groups,
                person: true,
            }
        }))
    }

    /// Why some of these approvals rules (a profile's, or a handler's
    /// actions') cannot be met as things stand: each that needs more
    /// approvals than there are people who may give them (only people count
    /// toward more than one). A warning, not an error: people may be added
    /// after the profile or the handler.
    pub async fn unmet_quorums(
        &self,
        rules: &[actiongate_policy::approvals::CompiledRule],
    ) -> GateResult<Vec<String>> {
        let rules: Vec<_> = rules.iter().filter(|r| r.rule.count > 1).collect();
        if rules.is_empty() {
            return Ok(Vec::new());
        }
        let people = self.store().list_people().await?;
        let keys = self.store().list_keys().await?;
        // Each person's names as approver globs see them: theirs and
        // their keys'.
        let names: Vec<Vec<String>> = people
            .iter()
            .map(|p| {
                let mut n = vec![p.name.clone()];
                n.extend(
                    keys.iter()
                        .filter(|k| p.keys.contains(&k.id))
                        .map(|k| k.name.clone()),
                );
                n
            })
            .collect();
        Ok(rules
            .into_iter()
            .filter_map(|rule| {
                let may = people
                    .iter()
                    .zip(&names)
                    .filter(|(p, n)| {
                        actiongate_policy::approvals::approver_allowed(
                            &rule.rule.approvers,
                            actiongate_policy::approvals::Approver {
                                names: n,
                                groups: &p.groups,
                            },
                        )
                    })
                    .count();
                (may < rule.rule.count as usize).then(|| {
                    format!(
                        "{} needs {} approvals from distinct people, but {may} of the people \
                         registered may approve it: its actions cannot be approved until more \
                         are (POST /v1/people, or `actiongate person add`)",
                        rule.label(),
                        rule.rule.count
                    )
                })
            })
            .collect())
    }

    /// The people in `group`.
    pub async fn people_in(&self, group: &str) -> GateResult<Vec<Person>> {
        Ok(self
            .store()
            .list_people()
            .await?
            .into_iter()
            .filter(|p| p.groups.iter().any(|g| g == group))
            .collect())
    }
}

fn not_found(e: StoreError, id: &str) -> GateError {
    match e {
        StoreError::NotFound => GateError::not_found(format!("no person '{id}'")),
        e => e.into(),
    }
}
