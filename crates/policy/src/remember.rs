//! What a "remember" (a grant made while approving an action) can cover:
//! one grant pattern per simple command of the analysed line, or a plain
//! reason why no grant can cover it. A grant built from the raw text of a
//! compound line (`cd app && cargo build`) would never match anything,
//! since grants are matched command by command.

use crate::profile::Profile;
use crate::shell::analyze;
use serde::Serialize;

/// Why no grant can cover an action's detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{reason}")]
pub struct NoGrant {
    /// A sentence for humans, naming what in the detail stops a grant.
    pub reason: String,
}

/// The grant patterns (regexes over a detail, as `POST /v1/grants` takes
/// them) that together allow `tool`'s `detail` under `profile`'s reading of
/// the tool: for a shell or `git` tool one exact pattern per distinct
/// simple command in canonical form (`cargo fmt && cargo build` gives
/// `cargo fmt` and `cargo build`; a line that changes directory is granted
/// whole instead, [`needs_whole_line`]), for any other tool the whole
/// detail.
///
/// A line with a hazard (substitution, redirection to a file, a command
/// that runs commands, …) can never be allowed by a grant, so it gets an
/// error saying why; so does a line with no command at all.
pub fn grant_patterns(profile: &Profile, tool: &str, detail: &str) -> Result<Vec<String>, NoGrant> {
    let Some(dialect) = profile.dialect(tool) else {
        return Ok(vec![regex::escape(detail)]);
    };
    let analysis = analyze(dialect, detail);
    if let Some(hazard) = analysis.hazards.first() {
        return Err(NoGrant {
            reason: format!(
                "no grant can cover this command line: {hazard}, so it always needs a human"
            ),
        });
    }
    if analysis.commands.is_empty() {
        return Err(NoGrant {
            reason: "no grant can cover this command line: it runs no command".to_owned(),
        });
    }
    let mut patterns: Vec<String> = Vec::with_capacity(analysis.commands.len());
    for command in &analysis.commands {
        let pattern = regex::escape(command);
        if !patterns.contains(&pattern) {
            patterns.push(pattern);
        }
    }
    Ok(patterns)
}

/// Whether a grant made from `tool`'s `detail` must be for the whole line:
/// it changes directory (`cd`, `pushd`, `popd`) before another command, so
/// its other commands mean what they do only there (`cd /tmp/sandbox && rm
/// -rf data` must not grant `rm -rf data` wherever the agent stands).
pub fn needs_whole_line(profile: &Profile, tool: &str, detail: &str) -> bool {
    let Some(dialect) = profile.dialect(tool) else {
        return false;
    };
    let analysis = analyze(dialect, detail);
    analysis.commands.len() > 1
        && analysis.commands.iter().any(|c| {
            let program = c.split(' ').next().unwrap_or("");
            matches!(
                program.rsplit('/').next(),
                Some("cd" | "pushd" | "popd" | "chdir")
            )
        })
}

/// The whole-line grant pattern ([`crate::ToolPattern::whole_line`]) that
/// allows exactly `tool`'s `detail` as sent: what approving a plan's step
/// grants. A shell line is checked as [`grant_patterns`] checks it (a line
/// no grant can cover is refused, saying why), but the grant is for the
/// line, so none of its commands runs alone, reordered or repeated on it.
pub fn line_pattern(profile: &Profile, tool: &str, detail: &str) -> Result<String, NoGrant> {
    grant_patterns(profile, tool, detail)?;
    Ok(regex::escape(detail))
}
