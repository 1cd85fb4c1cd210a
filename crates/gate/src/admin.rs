//! What admins do: issue and revoke keys, set agents and their profiles,
//! register, replace, retire handlers and rotate their secrets.
//!
//! A key bound to an agent never administers: it could otherwise raise its
//! own agent's power (a laxer profile, an unbound operator key that
//! approves for it). Admin keys cannot be bound to an agent at all.

use chrono::{DateTime, Utc};

use actiongate_api::HandlerRegistration;
use actiongate_policy::{ListKind, Profile, ProfileError, ProfileSpec};
use actiongate_store::{Agent, ApiKey, HandlerRecord, NewHandler, Role, StoreError};

use crate::actions::validate_agent_id;
use crate::caller::issue_key;
use crate::handler_spec;
use crate::{Caller, Gate, GateError, GateResult};

/// A key just issued: the record, and its secret, shown only now.
pub struct NewKeyIssued {
    /// As stored.
    pub key: ApiKey,
    /// The bearer token.
    pub secret: String,
}

/// Checks a key request; shared with the `keys create` command on the
/// data dir.
pub fn validate_new_key(role: Role, agent: Option<&str>, name: Option<&str>) -> GateResult<()> {
    if let Some(agent) = agent {
        validate_agent_id(agent)?;
        if role == Role::Admin {
            return Err(GateError::invalid(
                "agent",
                "an admin key cannot be bound to an agent: it could raise its own agent's power",
            ));
        }
    } else if role == Role::Agent {
        return Err(GateError::invalid(
            "agent",
            "an agent key needs the agent it acts as",
        ));
    }
    if name
        .is_some_and(|n| n.is_empty() || n.chars().count() > 256 || n.chars().any(char::is_control))
    {
        return Err(GateError::invalid(
            "name",
            "1-256 characters, none of them control characters",
        ));
    }
    Ok(())
}

/// [`compile_profile`] off the runtime's threads, which a large profile
/// would hold for seconds (`/healthz` and every agent waiting).
pub async fn compile_off_runtime(json: &serde_json::Value) -> GateResult<Profile> {
    let json = json.clone();
    tokio::task::spawn_blocking(move || compile_profile(&json))
        .await
        .map_err(|_| GateError::internal())?
}

/// Compiles a profile given as JSON, naming the bad field or pattern.
pub fn compile_profile(json: &serde_json::Value) -> GateResult<Profile> {
    let spec: ProfileSpec = serde_json::from_value(json.clone()).map_err(|e| {
        GateError::invalid(
            "profile",
            format!("a preset name or {{allow, ask, deny?}}: {e}"),
        )
    })?;
    if let ProfileSpec::Custom(c) = &spec {
        let errors = actiongate_policy::rate::limit_errors(c);
        if !errors.is_empty() {
            return Err(GateError::invalid_fields(
                errors
                    .into_iter()
                    .map(|(field, message)| actiongate_api::FieldError {
                        field: format!("profile.{field}"),
                        message,
                    })
                    .collect(),
            ));
        }
    }
    Profile::from_spec(spec).map_err(|e| match e {
        ProfileError::InvalidPattern {
            list,
            index,
            pattern,
            message,
        } => {
            let list = match list {
                ListKind::Allow => "allow",
                ListKind::Ask => "ask",
                ListKind::Deny => "deny",
            };
            GateError::invalid(
                format!("profile.{list}[{index}]"),
                format!("invalid pattern '{pattern}': {message}"),
            )
        }
        ProfileError::TooManyPatterns { list, .. } => {
            GateError::invalid(format!("profile.{list}"), e.to_string())
        }
        ProfileError::PatternTooLong { list, index, .. } => {
            GateError::invalid(format!("profile.{list}[{index}]"), e.to_string())
        }
        ProfileError::InvalidApprovalRule(rule) => GateError::invalid(
            format!("profile.approvals[{}]", rule.index),
            rule.to_string(),
        ),
        other => GateError::invalid("profile", other.to_string()),
    })
}

/// An admin: the admin role and bound to no agent.
fn admin(caller: &Caller) -> GateResult<()> {
    caller.require(Role::Admin)?;
    if let Some(agent) = &caller.agent {
        return Err(GateError::forbidden(format!(
            "this key acts as agent '{agent}', and a key bound to an agent does not administer"
        )));
    }
    Ok(())
}

/// Whether `id` is (or could be) the action tool of an MCP call made
/// elsewhere: the proxy's `mcp__<server>__<tool>`, its resource reads and
/// prompts (`mcp-resource`, `mcp-prompt`, and the `mcp-` names kept for
/// it, such as `mcp-pin`), a hook's `mcp` (a name that is not plain) and
/// `other` (a name taken by a built-in tool). A handler of that id would
/// be judged by the rules, grants and taint written for those calls.
fn is_mcp_tool(id: &str) -> bool {
    id == "mcp" || id == "other" || id.starts_with("mcp__") || id.starts_with("mcp-")
}

/// The handler to store, and its actions' approvals rules.
fn new_handler(
    reg: &HandlerRegistration,
    outbound: &crate::outbound::OutboundPolicy,
) -> GateResult<(NewHandler, Vec<actiongate_policy::approvals::CompiledRule>)> {
    // A handler's actions are `tool:<handler id>:…`: a handler named after
    // a built-in tool would get the rules written for that tool.
    // `permission` and `mcp-pin` are the decision-only tools of MCP's
    // request_permission and of the proxy's pinned tool definitions.
    if actiongate_policy::is_builtin_tool(&reg.id)
        || ["permission", "mcp-pin"].contains(&reg.id.as_str())
        || is_mcp_tool(&reg.id)
    {
        return Err(GateError::invalid(
            "id",
            format!(
                "'{}' is the name of a built-in tool or of MCP calls' tools (mcp, mcp__…, \
                 mcp-…, other); handler ids and tool names share the action string's \
                 namespace, so choose another id",
                reg.id
            ),
        ));
    }
    let rules = handler_spec::validate(reg)?;
    outbound
        .check_url(&reg.url)
        .map_err(|e| GateError::invalid("url", e))?;
    let timeout_ms = reg.timeout.as_deref().map(handler_timeout).transpose()?;
    let new = NewHandler {
        id: reg.id.clone(),
        name: reg.name.clone(),
        description: reg.description.clone(),
        url: reg.url.clone(),
        timeout_ms,
        spec: handler_spec::spec_json(reg),
    };
    Ok((new, rules))
}

/// A handler's per-attempt timeout in milliseconds: a duration (`30s`,
/// `5m`) of at most [`crate::dispatch::MAX_ATTEMPT`].
fn handler_timeout(t: &str) -> GateResult<i64> {
    let most = crate::dispatch::MAX_ATTEMPT;
    match actiongate_policy::parse_duration(t) {
        Ok(d) if d <= most => Ok(d.as_millis().try_into().unwrap_or(i64::MAX)),
        Ok(_) => Err(GateError::invalid(
            "timeout",
            format!("at most {} hours", most.as_secs() / 3600),
        )),
        Err(e) => Err(GateError::invalid("timeout", e.to_string())),
    }
}

impl Gate {
    /// Issues a key; its secret is in the answer only.
    pub async fn create_key(
        &self,
        caller: &Caller,
        role: Role,
        agent: Option<String>,
        name: Option<String>,
    ) -> GateResult<NewKeyIssued> {
        admin(caller)?;
        validate_new_key(role, agent.as_deref(), name.as_deref())?;
        let issued = issue_key(role, agent, name);
        let key = self.store().create_key(issued.record).await?;
        Ok(NewKeyIssued {
            key,
            secret: issued.secret,
        })
    }

    /// Every key, never their secrets.
    pub async fn list_keys(&self, caller: &Caller) -> GateResult<Vec<ApiKey>> {
        admin(caller)?;
        Ok(self.store().list_keys().await?)
    }

    /// Revokes a key: at once for this daemon's caches and the streams it
    /// holds open.
    pub async fn revoke_key(&self, caller: &Caller, id: &str) -> GateResult<ApiKey> {
        admin(caller)?;
        let key = self.store().revoke_key(id).await?;
        self.forget_key(&key.id);
        Ok(key)
    }

    /// Creates or replaces an agent and its profile (`None`: the default);
    /// `true` when created.
    pub async fn put_agent(
        &self,
        caller: &Caller,
        id: &str,
        name: Option<String>,
        profile: Option<serde_json::Value>,
    ) -> GateResult<(Agent, bool)> {
        admin(caller)?;
        validate_agent_id(id)
            .map_err(|_| GateError::invalid("id", "1-128 characters from A-Z a-z 0-9 _ - . @"))?;
        crate::actions::check_len("name", name.as_deref(), 256)?;
        let (profile, warnings) = match profile {
            None | Some(serde_json::Value::Null) => (None, Vec::new()),
            Some(json) => {
                let profile = compile_off_runtime(&json).await?;
                crate::examples::check_examples(&profile)?;
                let warnings = self.unmet_quorums(profile.approval_rules()).await?;
                (Some(json), warnings)
            }
        };
        let (mut agent, created) = self.store().put_agent(id, name, profile).await?;
        self.forget_agent(id);
        agent.warnings = warnings;
        Ok((agent, created))
    }

    /// One agent.
    pub async fn get_agent(&self, caller: &Caller, id: &str) -> GateResult<Agent> {
        admin(caller)?;
        self.store()
            .get_agent(id)
            .await?
            .ok_or_else(|| GateError::not_found(format!("no agent '{id}'")))
    }

    /// Every agent.
    pub async fn list_agents(&self, caller: &Caller) -> GateResult<Vec<Agent>> {
        admin(caller)?;
        Ok(self.store().list_agents().await?)
    }

    /// Registers a handler; its new secret is in the answer only, with
    /// what in it cannot work as things stand (an action's quorum nobody
    /// could meet: [`Gate::unmet_quorums`]).
    pub async fn register_handler(
        &self,
        caller: &Caller,
        reg: &HandlerRegistration,
    ) -> GateResult<(HandlerRecord, String, Vec<String>)> {
        admin(caller)?;
        let (new, rules) = new_handler(reg, &self.config().outbound)?;
        let warnings = self.unmet_quorums(&rules).await?;
        let secret = crate::sign::new_secret();
        let record = self.store().create_handler(new, secret.clone()).await?;
        self.forget_handler(&record.id);
        Ok((record, secret, warnings))
    }

    /// Replaces a live handler's registration; its secret stays. Answers
    /// its warnings as [`Gate::register_handler`] does.
    pub async fn replace_handler(
        &self,
        caller: &Caller,
        id: &str,
        reg: &HandlerRegistration,
    ) -> GateResult<(HandlerRecord, Vec<String>)> {
        admin(caller)?;
        if reg.id != id {
            return Err(GateError::invalid(
                "id",
                format!("must equal the path's id '{id}'"),
            ));
        }
        let (new, rules) = new_handler(reg, &self.config().outbound)?;
        let mut warnings = self.unmet_quorums(&rules).await?;
        // Grants whose scope now means something else go first (a failure
        // after leaves fewer grants, never a wider one).
        let old = self.store().get_handler(id).await.map_err(|e| match e {
            StoreError::NotFound => GateError::not_found(format!("no live handler '{id}'")),
            other => other.into(),
        })?;
        let changed = crate::handler_change::changed_permissions(&old.spec, &new.spec);
        let revoked = self.revoke_grants_of(id, &changed).await?;
        if revoked > 0 {
            warnings.push(format!(
                "revoked {revoked} grant(s) of {}: the scopes of their actions changed, so a \
                 grant would now allow what nobody granted",
                changed.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        let record = self
            .store()
            .replace_handler(new)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => GateError::not_found(format!("no live handler '{id}'")),
                other => other.into(),
            })?;
        self.forget_handler(id);
        Ok((record, warnings))
    }

    /// A page of handlers by id (retired ones too with `include_retired`):
    /// at most 500, `page.after` the last id of the previous page; and
    /// whether the page was cut short of its limit to stay within
    /// [`crate::paging::PAGE_BYTES`] (a handler's spec holds its schemas:
    /// more may follow however short it is). The order is always by id.
    pub async fn list_handlers(
        &self,
        include_retired: bool,
        page: crate::ListPage,
    ) -> GateResult<(Vec<HandlerRecord>, bool)> {
        let page = page.checked(crate::paging::MAX_PAGE)?;
        let mut records = self.store().handlers_page(include_retired, &page).await?;
        let cut = crate::paging::cut_to_bytes(&mut records);
        Ok((records, cut))
    }

    /// One handler's record, retired or not.
    pub async fn handler_record(&self, caller: &Caller, id: &str) -> GateResult<HandlerRecord> {
        admin(caller)?;
        Ok(self.store().get_handler(id).await?)
    }

    /// Retires a handler: no new actions; its history stays readable.
    pub async fn retire_handler(&self, caller: &Caller, id: &str) -> GateResult<HandlerRecord> {
        admin(caller)?;
        let record = self.store().retire_handler(id).await?;
        self.forget_handler(id);
        Ok(record)
    }

    /// A new secret for handler `id`; the previous one stays valid for the
    /// configured grace, until the time answered.
    pub async fn rotate_handler_secret(
        &self,
        caller: &Caller,
        id: &str,
    ) -> GateResult<(String, DateTime<Utc>)> {
        admin(caller)?;
        let grace = self.config().dispatch.secret_grace;
        let until = Utc::now() + chrono::Duration::from_std(grace).unwrap_or_default();
        let secret = crate::sign::new_secret();
        self.store()
            .rotate_handler_secret(id, secret.clone(), until)
            .await?;
        self.forget_handler(id);
        Ok((secret, until))
    }
}
