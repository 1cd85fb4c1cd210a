//! Pure decision logic of actiongate: profiles, presets, shell-aware
//! matching, grants and scopes, the expiry grammar and approval words.
//!
//! Layout: [`verdict`] holds the answers, [`pattern`] the compiled pattern
//! lists, [`profile`] and [`presets`] the profiles, [`shell`] the parsing and
//! hazard analysis of shell commands, [`grant`] grants and scopes,
//! [`decide`] the decision itself, [`expiry`] and [`reply`] the two small
//! grammars humans type. Nothing here does I/O, and nothing is async.

pub mod decide;
pub mod expiry;
pub mod grant;
pub mod pattern;
pub mod presets;
pub mod profile;
pub mod reply;
pub mod shell;
pub mod verdict;

pub use chrono;
pub use chrono_tz;

pub use decide::{Decision, Rule, check, decide};
pub use expiry::{Expiry, ExpiryError, parse_duration, parse_expiry};
pub use grant::{Grant, GrantTarget, PermissionRef, Request, ToolPattern, scope_matches};
pub use pattern::{BACKTRACK_LIMIT, PatternError, PatternSet, SetMatch};
pub use presets::{UnknownPresetError, get_preset, preset_names, preset_spec};
pub use profile::{
    CustomProfile, DEFAULT_SHELL_TOOLS, Profile, ProfileError, ProfileSpec, format_action,
    split_action,
};
pub use reply::{Reply, parse_reply};
pub use shell::{Hazard, ShellAnalysis, analyze_shell};
pub use verdict::{ListKind, Verdict};
