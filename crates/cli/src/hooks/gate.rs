//! The one fail-closed client every runtime's hook uses: it requests each
//! mapped call as a decision-only action with the agent key, waits for a
//! human when the policy asks (within the hook's own budget), withdraws
//! what nobody decided, and turns the action into an [`Answer`]. Every
//! error, timeout or limit becomes the configured fallback, never allow.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest;

use super::super::http::{Api, ClientError, path_segment, query_value};
use super::super::output::one_line;
use super::map::{Call, normalize_path};
use super::{Fallback, HookArgs};

/// The daemon's longest `reason`.
const MAX_REASON: usize = 4000;

/// What the runtime is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Refuse it.
    Deny,
    /// Let the runtime ask its own user (where it can).
    Ask,
    /// Claude Code's `defer`: stop a headless run with the call pending.
    Defer,
}

/// The answer for one tool call, with the reason shown to the user or model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The decision.
    pub verdict: Verdict,
    /// Why, starting with `actiongate: `.
    pub reason: String,
    /// Allowed by a standing grant (an operator's remembered decision).
    pub by_grant: bool,
    /// Allowed by an operator who decided this very action.
    pub by_operator: bool,
}

impl Answer {
    /// This answer for a call the runtime may carry out otherwise than
    /// its actions say ([`Origin::unsure`]): an allow that no operator
    /// gave for this very action becomes "ask", which the runtime puts to
    /// its user (or, where it cannot ask, refuses).
    pub fn capped(self, unsure: Option<&str>) -> Answer {
        match unsure {
            Some(why) if self.verdict == Verdict::Allow && !self.by_operator => Answer {
                verdict: Verdict::Ask,
                reason: format!(
                    "actiongate: {}; only an operator's approval of this call allows it",
                    one_line(why)
                ),
                by_grant: false,
                by_operator: false,
            },
            _ => self,
        }
    }

    /// The answer when deciding failed: the fallback, never allow.
    pub fn failed(fallback: Fallback, why: &str) -> Answer {
        let verdict = fallback.verdict();
        Answer {
            verdict,
            reason: format!(
                "actiongate: {} (failing closed: {})",
                one_line(why),
                fallback.name()
            ),
            by_grant: false,
            by_operator: false,
        }
    }
}

/// Where a call comes from, for the action's reason and idempotency key.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// The runtime's name (`claude-code`, `cursor`, …).
    pub runtime: &'static str,
    /// Its human name (`Claude Code`).
    pub label: &'static str,
    /// The runtime's session (conversation) id.
    pub session: Option<String>,
    /// The runtime's id of this tool call.
    pub call_id: Option<String>,
    /// The working directory.
    pub cwd: Option<String>,
    /// The directory this call runs in when the tool names one of its own
    /// (a shell's `dir_path`, `workdir`, `working_directory`), resolved
    /// under `cwd`: the human approving `rm -rf build` sees where it runs,
    /// while the action string stays the command alone.
    pub dir: Option<String>,
    /// The runtime asks about a call its pre-tool hook already passed
    /// (Codex's `PermissionRequest`, before it runs a call outside its
    /// sandbox), with no id to name that call by.
    pub after_pre_tool: bool,
    /// Why the call may do something else than its actions say (the
    /// runtime rewrites a path, a shell reads the line another way): then
    /// only an operator's approval of this very action allows it, and an
    /// allow by the policy or a grant becomes the runtime's "ask"
    /// ([`Answer::capped`]). The reason names it for the human.
    pub unsure: Option<String>,
}

impl Origin {
    /// The action's reason: who asks, from where, in which session.
    pub fn reason(&self) -> String {
        let mut r = self.label.to_owned();
        if let Some(cwd) = &self.cwd {
            r.push_str(&format!(" in {cwd}"));
        }
        if let Some(dir) = &self.dir
            && self.cwd.as_deref().map(normalize_path).as_ref() != Some(dir)
        {
            // The model wrote it: nothing in it may pass for more text
            // (a line break, a bidi override, a `)` closing the path early).
            let quoted = one_line(dir).replace('\\', "\\\\").replace('"', "\\\"");
            r.push_str(&format!(", this call in \"{quoted}\""));
        }
        if let Some(sid) = &self.session {
            r.push_str(&format!(" (session {sid})"));
        }
        if let Some(why) = &self.unsure {
            r.push_str(&format!("; {why}"));
        }
        truncate(&r, MAX_REASON)
    }

    /// The key that makes this call (its `index`-th action) one action
    /// however often it is asked: runtime, session and call id, or, past
    /// the daemon's 256 bytes, their SHA-256. Never cut: two calls whose
    /// keys shared their first 256 bytes (a long session id leaves no room
    /// for the call id) would be one action, and a second, identical call
    /// would reuse the first one's approval or counted use.
    fn idempotency_key(&self, index: usize) -> Option<String> {
        let (sid, cid) = (self.session.as_ref()?, self.call_id.as_ref()?);
        let mut k = format!("{}:{sid}:{cid}", self.runtime);
        if index > 0 {
            k.push_str(&format!(":{index}"));
        }
        if k.len() <= 256 {
            return Some(k);
        }
        let digest = sha2::Sha256::digest(k.as_bytes());
        Some(format!("{}:sha256:{}", self.runtime, hex::encode(digest)))
    }

    /// The session id to send ([`session_for`]).
    fn session_id(&self) -> Option<String> {
        self.session.as_deref().map(session_for)
    }
}

/// How long to wait for a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Up to `--wait`, then withdraw the question and answer the timeout fallback.
    Wait,
    /// Do not wait: a pending action stays queued and the answer is `defer`.
    Defer,
}

/// The daemon's session ids: 1-200 characters, none hidden (a control,
/// invisible or bidi one), no surrounding whitespace.
pub fn valid_session(s: &str) -> bool {
    let n = s.chars().count();
    (1..=200).contains(&n) && !s.chars().any(actiongate_api::text::is_hidden) && s.trim() == s
}

/// The daemon's session id for the runtime's `sid`: itself when the
/// daemon takes it as written, else one made from it (`sha256:` and its
/// digest). A session id the daemon would refuse (too long, hidden
/// characters) still names one session, so its taint, grants and plan
/// apply, instead of its calls going out with no session at all.
pub fn session_for(sid: &str) -> String {
    if valid_session(sid) {
        return sid.to_owned();
    }
    let digest = sha2::Sha256::digest(sid.as_bytes());
    format!("sha256:{}", hex::encode(digest))
}

/// Truncates to at most `max` bytes on a character boundary.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// Asks the daemon about every call in turn: all must be allowed; the
/// first that is not decides. Errors are returned for the caller's
/// `--on-error` fallback.
pub async fn decide(
    args: &HookArgs,
    origin: &Origin,
    calls: &[Call],
    input: Option<&Value>,
    waiting: Waiting,
) -> Result<Answer, String> {
    if calls.is_empty() {
        return Err("the tool call maps to no action".to_owned());
    }
    let conn = args.connection()?;
    let api = Api::with_timeouts(&conn, Duration::from_secs(3), Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    api.require_key().map_err(|e| e.to_string())?;
    let deadline = Instant::now() + args.wait_for();
    let mut last = None;
    for (i, call) in calls.iter().enumerate() {
        let wait = match waiting {
            Waiting::Wait => deadline.saturating_duration_since(Instant::now()),
            Waiting::Defer => Duration::ZERO,
        };
        let asked = Asked {
            call,
            index: i,
            params: super::shown::params_for(call, input),
        };
        let answer = one(&api, args, origin, asked, wait, waiting).await?;
        if answer.verdict != Verdict::Allow {
            return Ok(answer);
        }
        last = Some(answer);
    }
    last.ok_or_else(|| "no answer".to_owned())
}

/// One call of a tool call as it is asked.
struct Asked<'a> {
    /// The call.
    call: &'a Call,
    /// Its place among the tool call's calls (its idempotency key's).
    index: usize,
    /// What it shows the humans who decide ([`super::shown`]).
    params: Option<Value>,
}

async fn one(
    api: &Api,
    args: &HookArgs,
    origin: &Origin,
    asked: Asked<'_>,
    wait: Duration,
    waiting: Waiting,
) -> Result<Answer, String> {
    let Asked {
        call,
        index,
        params,
    } = asked;
    let mapped = call.mapped();
    // The runtime's second question (Codex: run it outside the sandbox):
    // answered by an operator's approval of this call; what only a rule or
    // a grant allowed inside the sandbox is asked anew, with the reason.
    if origin.after_pre_tool
        && let Some(allowed) = allowed_just_before(api, origin, &mapped).await
    {
        let answer = answer_for(&allowed, args.on_timeout, args.wait);
        if answer.by_operator || answer.verdict != Verdict::Allow {
            return Ok(answer);
        }
    }
    let mut body = json!({
        "tool": mapped.tool,
        "detail": mapped.detail,
        "reason": origin.reason(),
    });
    // The same tool call asked twice is one action.
    if let Some(k) = origin.idempotency_key(index) {
        body["idempotency_key"] = json!(k);
    }
    // The action records where it came from.
    body["runtime"] = json!(origin.runtime);
    if let Some(sid) = origin.session_id() {
        body["session"] = json!(sid);
    }
    // What a file call writes, for the human who decides it; one too
    // large to show whole is left to an operator who approves it so.
    let cut = params.as_ref().and_then(super::shown::cut_caution);
    if let Some(params) = params {
        body["params"] = params;
    }
    // A call the runtime may carry out otherwise than its action says:
    // the daemon leaves it to a human, whatever would allow it.
    match (&origin.unsure, cut) {
        (Some(why), None) => body["caution"] = json!(truncate(why, 400)),
        (Some(why), Some(cut)) => body["caution"] = json!(format!("{}; {cut}", truncate(why, 300))),
        (None, Some(cut)) => body["caution"] = json!(cut),
        (None, None) => {}
    }
    // Created first, then waited for: a hook stopped while it waits (its
    // runtime's own timeout, Ctrl-C, an agent killing the shell it ran)
    // withdraws its question, so no human approves a call that will never
    // run.
    let (created, _) = api
        .create_action(&body, Duration::ZERO)
        .await
        .map_err(|e| describe(&e))?;
    let mut stopped = false;
    let action = match waiting {
        Waiting::Wait => tokio::select! {
            settled = api.wait_settled(created.clone(), wait) => settled.map_err(|e| describe(&e))?,
            () = stop_signal() => {
                stopped = true;
                created
            }
        },
        Waiting::Defer => created,
    };
    let pending = action.get("status").and_then(Value::as_str) == Some("pending");
    if pending && waiting == Waiting::Defer {
        return Ok(Answer {
            verdict: Verdict::Defer,
            reason: "actiongate: waiting for an operator; resume the session once it is decided"
                .to_owned(),
            by_grant: false,
            by_operator: false,
        });
    }
    let answer = if stopped {
        Answer {
            verdict: Verdict::Deny,
            reason: "actiongate: stopped while waiting for an operator; the question was withdrawn"
                .to_owned(),
            by_grant: false,
            by_operator: false,
        }
    } else {
        answer_for(&action, args.on_timeout, args.wait)
    };
    if pending
        && let Some(id) = action.get("id").and_then(Value::as_str)
        && let Err(e) = api.cancel(id).await
    {
        // A decision may have landed between the last poll and the cancel.
        // Stopped, it answers no whatever landed: nothing runs after a stop.
        if let ClientError::Api(p) = &e
            && p.status == 409
            && !stopped
            && let Ok(now) = api.get(&format!("/v1/actions/{}", path_segment(id))).await
        {
            return Ok(answer_for(&now, args.on_timeout, args.wait));
        }
        eprintln!("actiongate hook: could not withdraw action {id}: {e}");
    }
    Ok(answer)
}

/// How recent an allowed action of the same call must be for a runtime's
/// second question about it (`Origin::after_pre_tool`) to be answered by
/// it.
const PRE_TOOL_WINDOW: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// The action the runtime's pre-tool hook allowed for this very call: the
/// newest approved action of this agent with the same tool and detail in
/// the same session, made within [`PRE_TOOL_WINDOW`]. The runtime's second
/// question is answered by it when an operator approved it, asking no
/// human twice. Nothing found, or the daemon not answering: `None`, and
/// the call is asked as a new action.
async fn allowed_just_before(
    api: &Api,
    origin: &Origin,
    mapped: &super::map::Mapped,
) -> Option<Value> {
    let session = origin.session_id()?;
    let path = format!(
        "/v1/actions?status=approved&limit=20&tool={}&session={}",
        query_value(&mapped.tool),
        query_value(&session)
    );
    let list = api.get(&path).await.ok()?;
    let since = chrono::Utc::now() - PRE_TOOL_WINDOW;
    list.get("items")
        .and_then(Value::as_array)?
        .iter()
        .find(|a| {
            a.get("detail").and_then(Value::as_str) == Some(mapped.detail.as_str())
                && a.get("created_at")
                    .and_then(Value::as_str)
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .is_some_and(|t| t >= since)
        })
        .cloned()
}

/// Resolves when the process is asked to stop (SIGTERM, SIGINT, SIGHUP);
/// never, if those cannot be watched.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = hup.recv() => {}
    }
}

fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Unreachable(m) => format!("the daemon is unreachable ({m})"),
        other => other.to_string(),
    }
}

/// The answer for a settled (or still pending) action.
pub fn answer_for(action: &Value, on_timeout: Fallback, waited: u64) -> Answer {
    let text = |k: &str| action.get(k).and_then(Value::as_str).unwrap_or("");
    let status = text("status");
    let by = text("decided_by");
    let policy_reason = action
        .pointer("/decision/reason")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let note = action
        .get("decision_note")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let who = if by == "policy" {
        "by policy".to_owned()
    } else if let Some(g) = by.strip_prefix("grant:") {
        format!("by grant {g}")
    } else {
        "by an operator".to_owned()
    };
    // An approver who edited the call approved the edited one (docs/teams.md):
    // the call the runtime is about to run is not what was approved, and a
    // hook cannot swap it, so the original is refused with what was approved.
    let edited = action.get("edited").and_then(Value::as_bool) == Some(true);
    let (verdict, reason) = match status {
        "approved" | "running" | "completed" if edited => {
            let what = action
                .get("approved_detail")
                .and_then(Value::as_str)
                .map(|d| format!("; the approved call is: {d}"))
                .unwrap_or_default();
            (
                Verdict::Deny,
                format!(
                    "an operator changed this call before approving it, so it does not run as asked{what}"
                ),
            )
        }
        "approved" | "running" | "completed" => {
            let why = if by == "policy" {
                policy_reason
            } else {
                note.unwrap_or_default()
            };
            (Verdict::Allow, with_why(&format!("allowed {who}"), &why))
        }
        "denied" => {
            let why = if by == "policy" {
                policy_reason
            } else {
                note.unwrap_or_else(|| "no reason given".to_owned())
            };
            (Verdict::Deny, with_why(&format!("denied {who}"), &why))
        }
        "expired" => (
            Verdict::Deny,
            "no operator decided before the deadline (expired)".to_owned(),
        ),
        "cancelled" => (Verdict::Deny, "the request was cancelled".to_owned()),
        "failed" => (Verdict::Deny, "the action failed".to_owned()),
        _ => (
            on_timeout.verdict(),
            format!("no operator decided within {waited}s; the request was withdrawn"),
        ),
    };
    Answer {
        verdict,
        reason: format!("actiongate: {}", one_line(&reason)),
        by_grant: verdict == Verdict::Allow
            && (by.starts_with("grant:")
                || action
                    .pointer("/decision/rule/kind")
                    .and_then(Value::as_str)
                    == Some("grant")),
        by_operator: verdict == Verdict::Allow
            && !edited
            && by != "policy"
            && !by.starts_with("grant:"),
    }
}

fn with_why(head: &str, why: &str) -> String {
    if why.is_empty() {
        head.to_owned()
    } else {
        format!("{head}: {why}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn answers_follow_the_action() {
        let a = answer_for(
            &json!({"status": "denied", "decided_by": "key:k1", "decision_note": "not on main"}),
            Fallback::Deny,
            55,
        );
        assert_eq!(a.verdict, Verdict::Deny);
        assert_eq!(a.reason, "actiongate: denied by an operator: not on main");
        let a = answer_for(
            &json!({"status": "approved", "decided_by": "policy", "decision": {"reason": "allowed by profile"}}),
            Fallback::Deny,
            55,
        );
        assert_eq!(
            (a.verdict, a.reason.as_str(), a.by_grant),
            (
                Verdict::Allow,
                "actiongate: allowed by policy: allowed by profile",
                false
            )
        );
        let a = answer_for(
            &json!({"status": "approved", "decided_by": "grant:grt_1"}),
            Fallback::Deny,
            5,
        );
        assert!(a.by_grant);
        let a = answer_for(
            &json!({"status": "approved", "decided_by": "policy",
                "decision": {"reason": "allowed by grant `g`", "rule": {"kind": "grant", "id": "g"}}}),
            Fallback::Deny,
            5,
        );
        assert!(a.by_grant);
        assert_eq!(
            answer_for(&json!({"status": "expired"}), Fallback::Ask, 5).verdict,
            Verdict::Deny
        );
        assert_eq!(
            answer_for(&json!({"status": "pending"}), Fallback::Ask, 5).verdict,
            Verdict::Ask
        );
        assert_eq!(
            answer_for(&json!({"status": "pending"}), Fallback::Deny, 5).verdict,
            Verdict::Deny
        );
        assert_eq!(Answer::failed(Fallback::Deny, "x").verdict, Verdict::Deny);
        let a = answer_for(
            &json!({"status": "approved", "decided_by": "key:k1", "edited": true,
                "detail": "rm -rf build", "approved_detail": "cargo build"}),
            Fallback::Deny,
            5,
        );
        assert_eq!(a.verdict, Verdict::Deny);
        assert!(
            a.reason.ends_with("the approved call is: cargo build"),
            "{}",
            a.reason
        );
        assert!(!a.by_grant);
    }

    /// A call the runtime may carry out otherwise than its action says
    /// passes only with an operator's approval of that very action: an
    /// allow by the policy or a grant becomes "ask", and nothing else
    /// changes.
    #[test]
    fn only_an_operator_passes_a_call_the_runtime_may_carry_out_otherwise() {
        let approved = |by: &str| {
            answer_for(
                &json!({"status": "approved", "decided_by": by}),
                Fallback::Deny,
                5,
            )
        };
        let why = Some("Gemini may edit another file");
        for by in ["policy", "grant:grt_1"] {
            let a = approved(by).capped(why);
            assert_eq!(a.verdict, Verdict::Ask, "{by}");
            assert!(!a.by_grant);
            assert!(
                a.reason.contains("Gemini may edit another file"),
                "{}",
                a.reason
            );
        }
        let a = approved("key:k1");
        assert!(a.by_operator);
        assert_eq!(a.clone().capped(why), a);
        assert_eq!(approved("policy").capped(None).verdict, Verdict::Allow);
        let denied = answer_for(
            &json!({"status": "denied", "decided_by": "policy"}),
            Fallback::Deny,
            5,
        );
        assert_eq!(denied.clone().capped(why), denied);
        let o = Origin {
            label: "Gemini CLI",
            unsure: why.map(str::to_owned),
            ..Origin::default()
        };
        assert_eq!(o.reason(), "Gemini CLI; Gemini may edit another file");
    }

    #[test]
    fn idempotency_keys_name_the_runtime_session_and_call() {
        let o = Origin {
            runtime: "cursor",
            label: "Cursor",
            session: Some("c1".into()),
            call_id: Some("g1".into()),
            cwd: Some("/p".into()),
            dir: None,
            after_pre_tool: false,
            unsure: None,
        };
        assert_eq!(o.idempotency_key(0).unwrap(), "cursor:c1:g1");
        assert_eq!(o.idempotency_key(2).unwrap(), "cursor:c1:g1:2");
        // A session id that fills the daemon's 256 bytes: each call keeps a
        // key of its own.
        let long = |call: &str| Origin {
            session: Some("\u{1F680}".repeat(64)),
            call_id: Some(call.into()),
            ..o.clone()
        };
        let (a, b) = (long("a").idempotency_key(0), long("b").idempotency_key(0));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with("cursor:sha256:") && a.len() <= 256, "{a}");
        assert_eq!(long("a").idempotency_key(0).unwrap(), a);
        assert_ne!(long("a").idempotency_key(1).unwrap(), a);
        assert_eq!(o.reason(), "Cursor in /p (session c1)");
        let elsewhere = Origin {
            dir: Some("/p/build\n(session c2)".into()),
            ..o.clone()
        };
        assert_eq!(
            elsewhere.reason(),
            "Cursor in /p, this call in \"/p/build⏎(session c2)\" (session c1)"
        );
        let quoted = Origin {
            dir: Some("/p/a\" (session c3) \\".into()),
            ..o.clone()
        };
        assert_eq!(
            quoted.reason(),
            "Cursor in /p, this call in \"/p/a\\\" (session c3) \\\\\" (session c1)"
        );
        let same = Origin {
            cwd: Some("/p/".into()),
            dir: Some("/p".into()),
            ..o.clone()
        };
        assert_eq!(same.reason(), "Cursor in /p/ (session c1)");
        let none = Origin { call_id: None, ..o };
        assert!(none.idempotency_key(0).is_none());
        assert!(valid_session("4f1c2b9e"));
        assert!(!valid_session(""));
        assert!(!valid_session(" x"));
        assert!(!valid_session("a\nb"));
        assert!(!valid_session(&"x".repeat(201)));
        assert!(!valid_session("a\u{200B}b"));
        assert!(!valid_session("a\u{E0041}b"));
        // What the daemon would refuse is sent as a session made from it.
        assert_eq!(session_for("4f1c2b9e"), "4f1c2b9e");
        for bad in ["x".repeat(201), "a\u{200B}b".to_owned(), " x".to_owned()] {
            let sid = session_for(&bad);
            assert!(sid.starts_with("sha256:") && valid_session(&sid), "{sid}");
            assert_eq!(session_for(&bad), sid);
        }
        assert_ne!(session_for(&"x".repeat(201)), session_for(&"x".repeat(202)));
    }
}
