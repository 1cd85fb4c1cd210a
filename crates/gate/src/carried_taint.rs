//! Taint carried from one session to another that share a carrier: one
//! MCP connection of the handshake era, over which the model itself names
//! the session of each call (a tool argument). A model that read a
//! stranger's text in one session could otherwise shed the taint by naming
//! a fresh session for its next call. So whichever session a call over a
//! connection names is tainted as soon as any session named over the same
//! connection before is (docs/sessions.md). The adapter keeps which
//! sessions a carrier named; the gate carries the taint.

use crate::sessions::validate_session;
use crate::{Caller, Gate, GateResult};

/// What [`Gate::carry_taint`] found of the session a call named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    /// The caller's own session (or one nobody has used yet), with a valid
    /// id: a carrier remembers only those. Another agent's, or an invalid
    /// id, is refused by the call itself, and remembering it would push a
    /// tainted session out of the carrier's memory.
    pub own: bool,
    /// It is tainted now (before, or by this carry).
    pub tainted: bool,
}

impl Gate {
    /// Taints the caller's session `to` when it is not tainted and one of
    /// the caller's sessions `from` (named before over the same carrier)
    /// is: its record names the same tainting action, and the session it
    /// came through. A session `to` the daemon would refuse (another
    /// agent's, an invalid id) is left alone: the call itself is refused.
    /// `to` is opened first when nobody has used it yet.
    pub async fn carry_taint(
        &self,
        caller: &Caller,
        from: &[String],
        to: &str,
    ) -> GateResult<Carried> {
        let agent = caller.agent_id()?;
        let refused = Carried {
            own: false,
            tainted: false,
        };
        if validate_session("session", to).is_err() {
            return Ok(refused);
        }
        let store = self.store();
        if store
            .session_owner(to)
            .await?
            .is_some_and(|owner| owner != agent)
        {
            return Ok(refused);
        }
        let profile = self.profile_of(agent).await?;
        if store
            .session_taint(to.to_owned(), profile.clone())
            .await?
            .is_some()
        {
            return Ok(Carried {
                own: true,
                tainted: true,
            });
        }
        for s in from.iter().filter(|s| *s != to) {
            if store.session_owner(s).await?.as_deref() != Some(agent) {
                continue;
            }
            let Some((by, what)) = store.session_taint(s.clone(), profile.clone()).await? else {
                continue;
            };
            self.touch_session(agent, to, None).await?;
            store
                .taint_session(
                    to.to_owned(),
                    by,
                    format!("{what} (read in session '{s}' over the same MCP connection)"),
                )
                .await?;
            tracing::info!(agent, from = %s, to, "taint carried over an MCP connection");
            return Ok(Carried {
                own: true,
                tainted: true,
            });
        }
        Ok(Carried {
            own: true,
            tainted: false,
        })
    }
}

impl Gate {
    /// Records that the caller's key session `carrier` (its `mcp-…`
    /// session) named the caller's session `to` over `/mcp`: a taint
    /// recorded on `to` later (an approval outside the call, a task that
    /// ends on another daemon) is recorded on `carrier` too, so every
    /// daemon carries it into the next session the key names. False when
    /// `to` is not stored yet (a call that stored nothing in it, such as a
    /// check): it is linked at a later call.
    pub async fn link_carrier(&self, caller: &Caller, to: &str, carrier: &str) -> GateResult<bool> {
        let agent = caller.agent_id()?;
        if to == carrier {
            return Ok(true);
        }
        // A read, not two writes, on each call in a session not stored yet.
        if self.store().session_owner(to).await?.is_none() {
            return Ok(false);
        }
        self.touch_session(agent, carrier, None).await?;
        Ok(self
            .store()
            .link_carrier(to.to_owned(), carrier.to_owned())
            .await?)
    }

    /// After a call in the caller's session `to` that is tainted: the
    /// time of the taint `to`'s carrier (the key's own session) holds is
    /// now, so every daemon carries it while the key keeps meeting it, not
    /// only for `sessions.idle_timeout` after it was first met. `to`'s own
    /// first taint, and the carrier's, stay as they were.
    pub async fn renew_carried_taint(&self, caller: &Caller, to: &str) -> GateResult<()> {
        let agent = caller.agent_id()?;
        let profile = self.profile_of(agent).await?;
        let store = self.store();
        if let Some((by, what)) = store.session_taint(to.to_owned(), profile).await? {
            store.taint_session(to.to_owned(), by, what).await?;
        }
        Ok(())
    }

    /// Whether session `id` was tainted within `sessions.idle_timeout`: a
    /// carrier's own session (an MCP key's) carries a taint only that
    /// long, as the carrier's memory on one daemon lasts.
    pub async fn tainted_lately(&self, id: &str) -> GateResult<bool> {
        let since = self.idle_before();
        Ok(self
            .store()
            .session_tainted_at(id)
            .await?
            .is_some_and(|at| at > since))
    }
}

/// Most sessions a carrier remembers besides a tainted one: past it, the
/// oldest is dropped.
pub const MAX_TRAIL: usize = 32;

/// The sessions one carrier named, oldest first, at most [`MAX_TRAIL`],
/// and the first of them found tainted, kept apart: naming many sessions
/// never pushes a taint out.
#[derive(Debug, Default, Clone)]
pub struct Trail {
    sessions: Vec<String>,
    tainted: Option<String>,
    /// Those of `sessions` linked to the key's own session in the store
    /// ([`Gate::link_carrier`]).
    linked: Vec<String>,
}

impl Trail {
    /// The sessions named before to carry a taint from into `to`: the
    /// tainted one first, when known.
    pub fn others(&self, to: &str) -> Vec<String> {
        self.tainted
            .iter()
            .chain(
                self.sessions
                    .iter()
                    .filter(|s| Some(*s) != self.tainted.as_ref()),
            )
            .filter(|s| *s != to)
            .cloned()
            .collect()
    }

    /// Records `session` as named now (only the caller's own: see
    /// [`Carried::own`]), and whether it is tainted.
    pub fn push(&mut self, session: &str, tainted: bool) {
        if tainted && self.tainted.is_none() {
            self.tainted = Some(session.to_owned());
        }
        self.sessions.retain(|s| s != session);
        self.sessions.push(session.to_owned());
        if self.sessions.len() > MAX_TRAIL {
            let gone = self.sessions.remove(0);
            self.linked.retain(|s| *s != gone);
        }
    }

    /// Whether `session` is known to be linked to the key's own session.
    pub fn is_linked(&self, session: &str) -> bool {
        self.linked.iter().any(|s| s == session)
    }

    /// Records that `session` (on the trail) is linked to the key's own.
    pub fn mark_linked(&mut self, session: &str) {
        if !self.is_linked(session) && self.sessions.iter().any(|s| s == session) {
            self.linked.push(session.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trail_keeps_each_session_once_newest_last_and_at_most_its_bound() {
        let mut t = Trail::default();
        t.push("a", false);
        t.push("b", false);
        t.push("a", false);
        assert_eq!(t.others("c"), ["b", "a"]);
        assert_eq!(t.others("a"), ["b"]);
        for i in 0..40 {
            t.push(&format!("s{i}"), false);
        }
        assert_eq!(t.others("").len(), MAX_TRAIL);
        assert_eq!(t.others("")[0], "s8");
    }

    #[test]
    fn a_tainted_session_is_never_pushed_out() {
        let mut t = Trail::default();
        t.push("read-here", true);
        for i in 0..100 {
            t.push(&format!("s{i}"), false);
        }
        assert_eq!(t.others("fresh")[0], "read-here");
        assert_eq!(t.others("fresh").len(), MAX_TRAIL + 1);
        assert!(!t.others("read-here").contains(&"read-here".to_owned()));
    }
}
