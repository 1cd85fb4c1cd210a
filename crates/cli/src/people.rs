//! `actiongate people` and `actiongate person add|set|rm` (admin key): who
//! each operator key and chat identity belongs to (docs/teams.md). A
//! decision made through any of them is that person's, and only people
//! count toward an action that needs more than one approval.

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::commands::{api, print_json};
use super::http::{Api, ClientError, path_segment, report};
use super::output::{clip, s, table};
use super::{Common, Exit};

/// Flags of `people`.
#[derive(Debug, Args)]
pub struct PeopleArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
}

/// `person add|set|rm`.
#[derive(Debug, Subcommand)]
pub enum PersonCommand {
    /// Add a person: a name, their groups, keys and chat identities.
    Add(PersonAddArgs),
    /// Replace a person (by name or id): what is not given is removed.
    Set(PersonSetArgs),
    /// Remove a person (by name or id); their keys and chat identities
    /// decide as themselves from then on.
    Rm(PersonRmArgs),
}

/// What a person is made of, as flags.
#[derive(Debug, Args)]
pub struct PersonFields {
    /// A group of theirs, named by approver rules as `group:<name>`; repeatable.
    #[arg(long = "group", value_name = "GROUP")]
    pub groups: Vec<String>,
    /// The id (`key_…`) of an operator or admin key of theirs; repeatable.
    #[arg(long = "key-id", value_name = "KEY_ID")]
    pub keys: Vec<String>,
    /// Their Telegram numeric user id.
    #[arg(long)]
    pub telegram: Option<String>,
    /// Their Slack user id (`U…`).
    #[arg(long)]
    pub slack: Option<String>,
    /// Their Discord user id.
    #[arg(long)]
    pub discord: Option<String>,
    /// Their WhatsApp number: digits, country code first, no `+`.
    #[arg(long)]
    pub whatsapp: Option<String>,
}

/// Flags of `person add`.
#[derive(Debug, Args)]
pub struct PersonAddArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Their name: unique, 1-64 of `A-Z a-z 0-9 _ - . @`.
    pub name: String,
    /// Groups, keys and chat identities.
    #[command(flatten)]
    pub fields: PersonFields,
}

/// Flags of `person set`.
#[derive(Debug, Args)]
pub struct PersonSetArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// The person: their name or id (`per_…`).
    pub person: String,
    /// A new name (default: the one they have).
    #[arg(long)]
    pub name: Option<String>,
    /// Groups, keys and chat identities: these replace theirs.
    #[command(flatten)]
    pub fields: PersonFields,
}

/// Flags of `person rm`.
#[derive(Debug, Args)]
pub struct PersonRmArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// The person: their name or id (`per_…`).
    pub person: String,
}

/// Runs `people`.
pub async fn people(a: PeopleArgs) -> Exit {
    match list(&a).await {
        Ok(exit) => exit,
        Err(e) => report(&e),
    }
}

/// Runs `person add|set|rm`.
pub async fn run(cmd: PersonCommand) -> Exit {
    let done = match cmd {
        PersonCommand::Add(a) => add(&a).await,
        PersonCommand::Set(a) => set(&a).await,
        PersonCommand::Rm(a) => rm(&a).await,
    };
    done.unwrap_or_else(|e| report(&e))
}

/// The API's body for a person.
fn body(name: &str, f: &PersonFields) -> Value {
    let mut chat = Map::new();
    for (chat_name, id) in [
        ("telegram", &f.telegram),
        ("slack", &f.slack),
        ("discord", &f.discord),
        ("whatsapp", &f.whatsapp),
    ] {
        if let Some(id) = id {
            chat.insert(chat_name.to_owned(), Value::String(id.clone()));
        }
    }
    json!({"name": name, "groups": f.groups, "keys": f.keys, "chat": chat})
}

/// A person's chat identities, `slack:U1 telegram:42`.
fn chats(p: &Value) -> String {
    let ids: Vec<String> = p["chat"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}:{v}")))
                .collect()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        "-".to_owned()
    } else {
        ids.join(" ")
    }
}

/// The strings of list `field` of `p`, comma-separated, or `-`.
fn joined(p: &Value, field: &str) -> String {
    let items: Vec<&str> = p[field]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if items.is_empty() {
        "-".to_owned()
    } else {
        items.join(",")
    }
}

async fn list(a: &PeopleArgs) -> Result<Exit, ClientError> {
    let api = api(&a.common)?;
    let people = api.get("/v1/people").await?;
    let items = people["items"].as_array().cloned().unwrap_or_default();
    if a.common.json {
        print_json(&Value::Array(items));
        return Ok(Exit::Ok);
    }
    if items.is_empty() {
        println!("no people: `actiongate person add NAME --key-id KEY_ID` adds one");
        return Ok(Exit::Ok);
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|p| {
            vec![
                clip(s(p, "name"), 32),
                s(p, "id").to_owned(),
                clip(&joined(p, "groups"), 40),
                clip(&joined(p, "keys"), 60),
                clip(&chats(p), 60),
            ]
        })
        .collect();
    print!(
        "{}",
        table(&["NAME", "ID", "GROUPS", "KEYS", "CHAT"], &rows)
    );
    Ok(Exit::Ok)
}

/// Prints `p` as the API has it, or a line saying what was done.
fn done(common: &Common, p: &Value, what: &str) -> Exit {
    if common.json {
        print_json(p);
    } else {
        println!("person {} {what} ({})", s(p, "name"), s(p, "id"));
    }
    Exit::Ok
}

async fn add(a: &PersonAddArgs) -> Result<Exit, ClientError> {
    let api = api(&a.common)?;
    let p = api.post("/v1/people", &body(&a.name, &a.fields)).await?;
    Ok(done(&a.common, &p, "added"))
}

/// The person `who` names: the one of that name, else `who` as an id
/// (the daemon answers 404 for neither).
async fn find(api: &Api, who: &str) -> Result<Value, ClientError> {
    let people = api.get("/v1/people").await?;
    if let Some(p) = people["items"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["name"] == who))
    {
        return Ok(p.clone());
    }
    api.get(&format!("/v1/people/{}", path_segment(who))).await
}

async fn set(a: &PersonSetArgs) -> Result<Exit, ClientError> {
    let api = api(&a.common)?;
    let current = find(&api, &a.person).await?;
    let name = a.name.as_deref().unwrap_or(s(&current, "name"));
    let path = format!("/v1/people/{}", path_segment(s(&current, "id")));
    let p = api.put(&path, &body(name, &a.fields)).await?;
    Ok(done(&a.common, &p, "replaced"))
}

async fn rm(a: &PersonRmArgs) -> Result<Exit, ClientError> {
    let api = api(&a.common)?;
    let current = find(&api, &a.person).await?;
    api.delete(&format!("/v1/people/{}", path_segment(s(&current, "id"))))
        .await?;
    if a.common.json {
        println!("{}", json!({"removed": s(&current, "id")}));
    } else {
        println!("person {} removed", s(&current, "name"));
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn fields() -> PersonFields {
        PersonFields {
            groups: vec!["dba".into()],
            keys: vec!["key_1".into()],
            telegram: None,
            slack: Some("U1".into()),
            discord: None,
            whatsapp: None,
        }
    }

    #[test]
    fn the_body_carries_only_the_chats_given() {
        let b = body("ann", &fields());
        assert_eq!(
            b,
            json!({"name": "ann", "groups": ["dba"], "keys": ["key_1"], "chat": {"slack": "U1"}})
        );
    }

    #[test]
    fn a_person_prints_their_chats_and_lists() {
        let p =
            json!({"chat": {"slack": "U1", "telegram": "42"}, "groups": [], "keys": ["a", "b"]});
        assert_eq!(chats(&p), "slack:U1 telegram:42");
        assert_eq!(joined(&p, "groups"), "-");
        assert_eq!(joined(&p, "keys"), "a,b");
    }
}
