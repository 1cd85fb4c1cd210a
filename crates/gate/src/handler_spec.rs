//! Handler registrations: their shape, their validation (schemas, declared
//! permissions, scope keys, templates) and the compiled form used for every
//! handler action (params validator, templates, scope pointers, masking).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use actiongate_store::HandlerRecord;

use actiongate_api::{ActionDecl, FieldError, HandlerRegistration, PermissionDecl};

use crate::error::GateError;
use crate::template::Template;

/// The parts of a registration kept as the stored spec.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Spec {
    permissions: Vec<PermissionDecl>,
    actions: Vec<ActionDecl>,
    #[serde(default)]
    timeout: Option<String>,
}

/// A compiled action.
pub struct CompiledAction {
    /// As declared.
    pub decl: ActionDecl,
    validator: jsonschema::Validator,
    detail: Option<Template>,
    title: Option<Template>,
    summary: Option<Template>,
    fields: Vec<(String, Template)>,
    /// Its `approvals`, compiled (`docs/teams.md`).
    pub approvals: Option<actiongate_policy::approvals::CompiledRule>,
}

/// A handler ready to check and describe actions.
pub struct CompiledHandler {
    /// As stored.
    pub record: HandlerRecord,
    /// Declared permissions by name.
    pub permissions: HashMap<String, PermissionDecl>,
    /// Declared actions by name, in registration order.
    pub actions: Vec<CompiledAction>,
}

pub(crate) fn is_slug(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Walks `properties` of a JSON Schema along `path`.
fn schema_has(schema: &Value, path: &[String]) -> bool {
    let mut s = schema;
    for seg in path {
        match s.get("properties").and_then(|p| p.get(seg)) {
            Some(next) => s = next,
            None => return false,
        }
    }
    true
}

/// Splits a JSON pointer into unescaped segments.
fn pointer_segments(ptr: &str) -> Option<Vec<String>> {
    if ptr.is_empty() {
        return Some(Vec::new());
    }
    let rest = ptr.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// An action's sensitive params, as paths of unescaped segments.
#[derive(Default)]
struct Sensitive(Vec<(String, Vec<String>)>);

impl Sensitive {
    /// Adds pointer `ptr`; `false` when it is not a pointer to a param.
    fn add(&mut self, ptr: &str) -> bool {
        match pointer_segments(ptr) {
            Some(segs) if !segs.is_empty() => {
                self.0.push((ptr.to_owned(), segs));
                true
            }
            _ => false,
        }
    }

    /// The sensitive pointer that `path` is, contains or lies inside, if
    /// any: a value read at `path` may then hold a sensitive one.
    fn clash(&self, path: &[String]) -> Option<&str> {
        self.0
            .iter()
            .find(|(_, s)| path.starts_with(s) || s.starts_with(path))
            .map(|(ptr, _)| ptr.as_str())
    }
}

struct Errors(Vec<FieldError>);

impl Errors {
    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }
}

fn check_schema(errs: &mut Errors, field: &str, schema: &Value) -> Option<jsonschema::Validator> {
    if !schema.is_object() {
        errs.add(field, "must be a JSON Schema object");
        return None;
    }
    if let Err(e) = jsonschema::meta::validate(schema) {
        errs.add(field, format!("not a valid JSON Schema: {e}"));
        return None;
    }
    match jsonschema::validator_for(schema) {
        Ok(v) => Some(v),
        Err(e) => {
            errs.add(field, format!("cannot be compiled: {e}"));
            None
        }
    }
}

fn template(errs: &mut Errors, field: String, text: &str, schema: &Value) -> Option<Template> {
    match Template::parse(text) {
        Ok(t) => {
            for path in t.params() {
                if !schema_has(schema, path) {
                    errs.add(
                        field.clone(),
                        format!("names param '{}' that params_schema lacks", path.join(".")),
                    );
                }
            }
            Some(t)
        }
        Err(e) => {
            errs.add(field, e);
            None
        }
    }
}

/// Validates a registration; every problem is reported with its place.
/// Answers its actions' approvals rules, compiled.
pub fn validate(
    reg: &HandlerRegistration,
) -> Result<Vec<actiongate_policy::approvals::CompiledRule>, GateError> {
    let (_, actions) = compile_parts(reg)?;
    // Checked at registration only: a stored handler registered before
    // stays in service, and a tool name two of its actions share calls
    // neither (`Gate::handler_tool`).
    let mut tools = HashMap::new();
    let mut errs = Errors(Vec::new());
    for (i, a) in reg.actions.iter().enumerate() {
        let name = crate::tools::tool_name(&reg.id, &a.name);
        if let Some(other) = tools.insert(name.clone(), &a.name) {
            errs.add(
                format!("actions[{i}].name"),
                format!(
                    "its MCP tool name '{name}' is also action '{other}''s: a call could not \
                     say which one it means"
                ),
            );
        }
    }
    if !errs.0.is_empty() {
        return Err(GateError::invalid_fields(errs.0));
    }
    Ok(actions.into_iter().filter_map(|a| a.approvals).collect())
}

type Parts = (HashMap<String, PermissionDecl>, Vec<CompiledAction>);

fn compile_parts(reg: &HandlerRegistration) -> Result<Parts, GateError> {
    let mut errs = Errors(Vec::new());
    if !is_slug(&reg.id, 64) {
        errs.add("id", "1-64 of a-z 0-9 _ -, starting with a letter or digit");
    }
    if reg.name.is_empty() || reg.name.len() > 256 {
        errs.add("name", "1-256 bytes");
    }
    if !(reg.url.starts_with("http://") || reg.url.starts_with("https://")) || reg.url.len() > 2048
    {
        errs.add("url", "an http:// or https:// URL");
    }
    if let Some(t) = &reg.timeout
        && actiongate_policy::parse_duration(t).is_err()
    {
        errs.add("timeout", "a duration like 30s or 2m");
    }
    let mut permissions = HashMap::new();
    for (i, p) in reg.permissions.iter().enumerate() {
        if !is_name(&p.name) {
            errs.add(
                format!("permissions[{i}].name"),
                "1-64 of A-Z a-z 0-9 _ - .",
            );
        }
        check_schema(
            &mut errs,
            &format!("permissions[{i}].parameters_schema"),
            &p.parameters_schema,
        );
        if permissions.insert(p.name.clone(), p.clone()).is_some() {
            errs.add(
                format!("permissions[{i}].name"),
                format!("'{}' is declared twice", p.name),
            );
        }
    }
    if reg.actions.is_empty() {
        errs.add("actions", "declare at least one action");
    }
    let mut names = std::collections::HashSet::new();
    let mut actions = Vec::new();
    for (i, a) in reg.actions.iter().enumerate() {
        let at = |f: &str| format!("actions[{i}].{f}");
        if !is_name(&a.name) {
            errs.add(at("name"), "1-64 of A-Z a-z 0-9 _ - .");
        }
        if !names.insert(a.name.clone()) {
            errs.add(at("name"), format!("'{}' is declared twice", a.name));
        }
        let validator = check_schema(&mut errs, &at("params_schema"), &a.params_schema);
        if let Some(h) = &a.hints
            && h.read_only == Some(true)
            && h.destructive == Some(true)
        {
            errs.add(
                at("hints"),
                "read_only and destructive contradict each other",
            );
        }
        let perm = permissions.get(&a.permission);
        if perm.is_none() {
            errs.add(
                at("permission"),
                format!("'{}' is not declared in permissions", a.permission),
            );
        }
        // Sensitive params first: everything derived from params in the
        // clear (the scope, the action string's detail) is checked against
        // them here, in one place.
        let mut sensitive = Sensitive::default();
        for (j, ptr) in a.sensitive.iter().enumerate() {
            if !sensitive.add(ptr) {
                errs.add(
                    at(&format!("sensitive[{j}]")),
                    format!("'{ptr}' is not a JSON pointer to a param"),
                );
            }
        }
        for (key, ptr) in &a.scope {
            if let Some(p) = perm
                && !schema_has(&p.parameters_schema, std::slice::from_ref(key))
            {
                errs.add(
                    at(&format!("scope.{key}")),
                    format!(
                        "permission '{}' has no scope key '{key}' in its parameters_schema",
                        a.permission
                    ),
                );
            }
            match pointer_segments(ptr) {
                Some(segs) if !segs.is_empty() && schema_has(&a.params_schema, &segs) => {
                    if let Some(s) = sensitive.clash(&segs) {
                        errs.add(
                            at(&format!("scope.{key}")),
                            format!(
                                "'{ptr}' is, contains or lies inside sensitive param '{s}'; \
                                 scope values are shown in the clear (actions, events, grants, \
                                 notifications, the page)"
                            ),
                        );
                    }
                }
                Some(_) => errs.add(
                    at(&format!("scope.{key}")),
                    format!("'{ptr}' does not point to a param in params_schema"),
                ),
                None => errs.add(
                    at(&format!("scope.{key}")),
                    format!("'{ptr}' is not a JSON pointer"),
                ),
            }
        }
        let detail = a
            .detail
            .as_ref()
            .and_then(|d| template(&mut errs, at("detail"), d, &a.params_schema));
        if let Some(t) = &detail {
            for path in t.params() {
                if let Some(s) = sensitive.clash(path) {
                    errs.add(
                        at("detail"),
                        format!(
                            "names param '{}', which is, contains or lies inside sensitive \
                             param '{s}'; the action string is shown and matched in the clear",
                            path.join(".")
                        ),
                    );
                }
            }
        }
        let (title, summary, fields) = match &a.render {
            Some(r) => (
                template(&mut errs, at("render.title"), &r.title, &a.params_schema),
                r.summary
                    .as_ref()
                    .and_then(|s| template(&mut errs, at("render.summary"), s, &a.params_schema)),
                r.fields
                    .iter()
                    .enumerate()
                    .filter_map(|(k, f)| {
                        template(
                            &mut errs,
                            at(&format!("render.fields[{k}].value")),
                            &f.value,
                            &a.params_schema,
                        )
                        .map(|t| (f.label.clone(), t))
                    })
                    .collect(),
            ),
            None => (None, None, Vec::new()),
        };
        let approvals = a.approvals.as_ref().and_then(|ap| {
            let rule = actiongate_policy::approvals::ApprovalRule {
                pattern: "(?s).*".to_owned(),
                count: ap.count,
                approvers: ap.approvers.clone(),
                escalate_after: ap.escalate_after.clone(),
                escalate_to: ap.escalate_to.clone(),
            };
            match actiongate_policy::approvals::compile_rule(0, &rule) {
                Ok(mut c) => {
                    c.origin = Some(format!("the approvals of handler action '{}'", a.name));
                    Some(c)
                }
                Err(e) => {
                    errs.add(at("approvals"), e.message);
                    None
                }
            }
        });
        if let Some(validator) = validator {
            actions.push(CompiledAction {
                decl: a.clone(),
                validator,
                detail,
                title,
                summary,
                fields,
                approvals,
            });
        }
    }
    if errs.0.is_empty() {
        Ok((permissions, actions))
    } else {
        Err(GateError::invalid_fields(errs.0))
    }
}

/// The stored spec of a registration.
pub fn spec_json(reg: &HandlerRegistration) -> Value {
    serde_json::to_value(Spec {
        permissions: reg.permissions.clone(),
        actions: reg.actions.clone(),
        timeout: reg.timeout.clone(),
    })
    .unwrap_or(Value::Null)
}

/// The registration a stored record describes.
pub fn registration_of(record: &HandlerRecord) -> Result<HandlerRegistration, GateError> {
    let spec: Spec = serde_json::from_value(record.spec.clone()).map_err(|e| {
        tracing::error!(handler = %record.id, error = %e, "stored handler spec does not decode");
        GateError::conflict(format!(
            "handler '{}' is stored in a form this daemon cannot read; an admin must register \
             it again (PUT /v1/handlers/{})",
            record.id, record.id
        ))
    })?;
    Ok(HandlerRegistration {
        id: record.id.clone(),
        name: record.name.clone(),
        description: record.description.clone(),
        url: record.url.clone(),
        timeout: spec.timeout,
        permissions: spec.permissions,
        actions: spec.actions,
    })
}

impl CompiledHandler {
    /// Compiles a stored handler.
    pub fn compile(record: HandlerRecord) -> Result<CompiledHandler, GateError> {
        let reg = registration_of(&record)?;
        // A handler registered under older rules (say, before a scope
        // pointer into a sensitive param was refused) serves nothing until
        // it is registered again; the caller is told so, never a bare 500.
        let (permissions, actions) = compile_parts(&reg).map_err(|e| {
            tracing::error!(handler = %record.id, error = %e, "stored handler spec does not compile");
            GateError::conflict(format!(
                "handler '{}' no longer passes registration checks ({}); an admin must \
                 register it again (PUT /v1/handlers/{})",
                record.id, e.detail, record.id
            ))
        })?;
        Ok(CompiledHandler {
            record,
            permissions,
            actions,
        })
    }

    /// One of its actions.
    pub fn action(&self, name: &str) -> Option<&CompiledAction> {
        self.actions.iter().find(|a| a.decl.name == name)
    }
}

impl CompiledAction {
    /// Every violation of the params schema, sensitive values never echoed.
    pub fn violations(&self, params: &Value) -> Vec<FieldError> {
        self.validator
            .iter_errors(params)
            .map(|e| {
                let path = e.instance_path().as_str().to_owned();
                FieldError {
                    field: format!(
                        "params{}",
                        if path.is_empty() { String::new() } else { path }
                    ),
                    message: e.masked().to_string(),
                }
            })
            .collect()
    }

    /// The action string's detail.
    pub fn detail(&self, params: &Value) -> String {
        match &self.detail {
            Some(t) => t.fill(params),
            None => self.decl.name.clone(),
        }
    }

    /// Scope values pointed at in `params`; keys with no value are left out.
    pub fn scope(&self, params: &Value) -> Map<String, Value> {
        self.decl
            .scope
            .iter()
            .filter_map(|(k, ptr)| params.pointer(ptr).map(|v| (k.clone(), v.clone())))
            .collect()
    }

    /// `after` (an edit of `before`) with each sensitive value sent as
    /// shown, `"***"`, put back to the value it stands for: an approver
    /// who edits another param sends the masked one as they read it.
    pub fn unmask_kept(&self, before: &Value, after: &mut Value) {
        for ptr in &self.decl.sensitive {
            if let (Some(old), Some(new)) = (before.pointer(ptr), after.pointer_mut(ptr))
                && new.as_str() == Some("***")
            {
                *new = old.clone();
            }
        }
    }

    /// The first sensitive param whose value differs between `before`
    /// and `after` (present in one only, or changed), as its pointer.
    pub fn sensitive_change(&self, before: &Value, after: &Value) -> Option<&str> {
        self.decl
            .sensitive
            .iter()
            .find(|ptr| before.pointer(ptr) != after.pointer(ptr))
            .map(String::as_str)
    }

    /// The pointers of its sensitive params.
    pub fn sensitive_pointers(&self) -> &[String] {
        &self.decl.sensitive
    }

    /// `params` with every sensitive value replaced by `"***"`.
    pub fn masked(&self, params: &Value) -> Value {
        let mut view = params.clone();
        for ptr in &self.decl.sensitive {
            if let Some(v) = view.pointer_mut(ptr) {
                *v = Value::String("***".to_owned());
            }
        }
        view
    }

    /// The display, rendered from masked params.
    pub fn display(&self, masked: &Value) -> Option<Value> {
        let title = self.title.as_ref()?;
        let mut d = Map::new();
        d.insert("title".into(), Value::String(title.fill(masked)));
        if let Some(s) = &self.summary {
            d.insert("summary".into(), Value::String(s.fill(masked)));
        }
        if !self.fields.is_empty() {
            let fields = self
                .fields
                .iter()
                .map(|(label, t)| serde_json::json!({"label": label, "value": t.fill(masked)}))
                .collect();
            d.insert("fields".into(), Value::Array(fields));
        }
        Some(Value::Object(d))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::ErrorCode;
    use serde_json::json;

    #[test]
    fn a_stored_handler_that_fails_todays_checks_is_a_conflict_naming_it() {
        // Stored before scope pointers into sensitive params were refused.
        let record = HandlerRecord {
            id: "mail".to_owned(),
            name: "Mail".to_owned(),
            description: None,
            url: "http://127.0.0.1:9/hook".to_owned(),
            timeout_ms: None,
            spec: json!({
                "permissions": [{
                    "name": "send",
                    "parameters_schema": {"type": "object", "properties": {"token": {"type": "string"}}},
                }],
                "actions": [{
                    "name": "send",
                    "permission": "send",
                    "params_schema": {"type": "object", "properties": {"token": {"type": "string"}}},
                    "sensitive": ["/token"],
                    "scope": {"token": "/token"},
                }],
            }),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
            retired_at: None,
        };
        let e = CompiledHandler::compile(record).err().unwrap();
        assert_eq!(e.code, ErrorCode::Conflict, "{e}");
        assert!(e.detail.contains("register it again"), "{e}");
        assert!(e.detail.contains("sensitive"), "{e}");
    }
}
