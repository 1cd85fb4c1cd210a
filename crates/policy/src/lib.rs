//! Pure decision logic of actiongate: profiles, presets, shell-aware
//! matching, grants and scopes, the expiry grammar and approval words.
//!
//! Layout: [`verdict`] holds the answers, [`pattern`] the compiled pattern
//! lists, [`profile`] and [`presets`] the profiles, [`shell`] the parsing and
//! hazard analysis of shell commands, [`grant`] grants and scopes,
//! [`decide`] the decision itself, [`expiry`] and [`reply`] the two small
//! grammars humans type. Nothing here does I/O, and nothing is async.
//!
//! Decisions worth knowing:
//!
//! - Patterns must match the whole action string. Patterns that are a
//!   literal followed by `.*` (`tool:file:.*`, `(?s).*`) are matched as a
//!   prefix test through a trie of literals; other plain patterns
//!   of a list are matched in one `RegexSet` pass; patterns with look-around or
//!   backreferences use `fancy-regex` with a backtracking limit
//!   ([`BACKTRACK_LIMIT`]). If a pattern hits the limit its answer is
//!   unknown, and the decision is **deny**, naming the pattern, whatever
//!   list it is in; an unknown answer never becomes an allow.
//! - For shell tools ([`DEFAULT_SHELL_TOOLS`] plus a profile's
//!   `shell_tools`) the detail is parsed once ([`analyze_shell`]); every
//!   simple command is judged as `tool:<tool>:<command>` against every list
//!   and the strictest answer wins. Deny patterns also see the whole line.
//!   A [`Hazard`] (substitution, redirection to a file, hidden command
//!   name, a command that runs commands, a writing option, anything
//!   unparsable, …) caps the answer at ask, under every profile including
//!   `open`, and for grants too.
//!   [`check`] skips the parsing when no deny or allow pattern can reach
//!   the tool and the ask list answers alike for every command (as for
//!   `bash` under `guarded` and `standard`), since it cannot change the
//!   verdict there; [`decide()`] always parses, because its reason names the
//!   deciding command.
//! - A handler action whose scope has a `command` ([`SHELL_SCOPE_KEY`])
//!   that ends its detail (the reference executor's `execute_command`,
//!   detail `execute_command {content}`) is judged like a shell tool: each
//!   simple command as `tool:<handler>:<detail before the command><command>`,
//!   hazards cap it at ask, and a grant's glob on `command` must match every
//!   simple command of a hazard-free line ([`scope_matches`]).
//! - `guarded` and `readonly` end in `(?s).*` ask patterns, so that
//!   multi-line details ask rather than fall through to deny.

pub mod approvals;
pub mod decide;
pub mod examples;
pub mod expiry;
pub mod findings;
pub mod grant;
pub mod pattern;
pub mod presets;
pub mod profile;
pub mod rate;
pub mod remember;
pub mod reply;
pub mod secrets;
mod session_calls;
pub mod shell;
pub mod verdict;

pub use chrono;
pub use chrono_tz;

pub use decide::{Decision, Rule, check, decide, decide_crediting};
pub use expiry::{
    Expiry, ExpiryError, WIRE_EXPIRY_PATTERN, parse_duration, parse_expiry, parse_wire_expiry,
};
pub use findings::{Finding, findings};
pub use grant::{
    CALL_SCOPE_KEY, Grant, GrantTarget, PermissionRef, Request, SHELL_SCOPE_KEY, ToolPattern,
    call_scope_value, literal_scope, scope_matches,
};
pub use pattern::{BACKTRACK_LIMIT, PatternError, PatternSet, SetMatch};
pub use presets::{UnknownPresetError, get_preset, preset_names, preset_spec};
pub use profile::{
    BUILTIN_TOOLS, CustomProfile, DEFAULT_SHELL_TOOLS, GIT_TOOL, MAX_PATTERN_LEN, MAX_PATTERNS,
    Profile, ProfileError, ProfileSpec, format_action, is_builtin_tool, split_action,
};
pub use remember::{NoGrant, grant_patterns, line_pattern, needs_whole_line};
pub use reply::{Reply, parse_reply};
pub use shell::{Dialect, Hazard, MAX_LEN, MAX_SEPARATORS, ShellAnalysis, analyze, analyze_shell};
pub use verdict::{ListKind, Verdict};
