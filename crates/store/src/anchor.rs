//! Signed audit anchors: the daemon's HMAC key, kept in the data dir, and
//! the periodic `audit.anchor` events that sign the chain's (seq, hash) as
//! it stood when they were written.
//!
//! The export's chain is computed from the stored events when it is read,
//! so whoever can write the database could change an event and every hash
//! after it would follow. An anchor event is part of the log: it records
//! the chain hash of the event just before it, with a MAC only the key can
//! make. A later edit before it changes the recomputed hash there, and
//! `audit verify --key` refuses the anchor; removing the anchor event
//! leaves a gap in the seqs.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::SqliteStore;
use crate::audit::{Anchor, chain_hash, event_content};
use crate::error::StoreError;
use crate::events::{NewEvent, after_on, insert_on};
use actiongate_api::model::Json;

/// The type of an anchor event.
pub const ANCHOR_EVENT: &str = "audit.anchor";

/// What a MAC is over: a periodic anchor in the log, or the end of one
/// export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signed {
    /// An `audit.anchor` event.
    Anchor,
    /// The final line of an export.
    End,
}

/// The daemon's audit key (HMAC-SHA256): whoever holds it can make anchors
/// and check them.
#[derive(Clone)]
pub struct AuditKey {
    secret: [u8; 32],
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey({})", self.id())
    }
}

impl AuditKey {
    /// Reads the key at `path` (64 hex digits).
    pub fn load(path: &Path) -> Result<AuditKey, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let bytes =
            hex::decode(text.trim()).map_err(|_| format!("{} is not a hex key", path.display()))?;
        let secret: [u8; 32] = bytes
            .try_into()
            .map_err(|_| format!("{} is not a 32-byte key", path.display()))?;
        Ok(AuditKey { secret })
    }

    /// Reads the key at `path`, creating it (readable by its owner alone)
    /// if there is none.
    ///
    /// The key is written to a temporary file beside it, synced and renamed
    /// into place, so a write that fails (a full disk) leaves no file. An
    /// empty file is never a key: only a first write cut short (before
    /// this was atomic) made one, so nothing was signed with it, and it is
    /// replaced with a warning rather than blocking every start.
    pub fn load_or_create(path: &Path) -> Result<AuditKey, String> {
        match std::fs::metadata(path) {
            Ok(meta) if meta.len() == 0 => {
                tracing::warn!(
                    path = %path.display(),
                    "the audit key file is empty (a first start that could not write it); \
                     making a new key"
                );
                std::fs::remove_file(path)
                    .map_err(|e| format!("cannot replace the empty {}: {e}", path.display()))?;
            }
            Ok(_) => return AuditKey::load(path),
            Err(_) => {}
        }
        let secret: [u8; 32] = rand::random();
        let cannot = |e: std::io::Error| format!("cannot create {}: {e}", path.display());
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        // A temporary file is readable by its owner alone.
        let mut tmp = tempfile::Builder::new()
            .prefix(".audit.key.")
            .tempfile_in(dir)
            .map_err(cannot)?;
        {
            use std::io::Write;
            writeln!(tmp, "{}", hex::encode(secret)).map_err(cannot)?;
        }
        tmp.as_file().sync_all().map_err(cannot)?;
        match tmp.persist_noclobber(path) {
            Ok(_) => {
                // The rename itself survives a crash once the directory is synced.
                if let Ok(d) = std::fs::File::open(dir) {
                    let _ = d.sync_all();
                }
                Ok(AuditKey { secret })
            }
            // Another process made it first.
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => AuditKey::load(path),
            Err(e) => Err(cannot(e.error)),
        }
    }

    /// A short public name of the key (not secret): which key signed.
    pub fn id(&self) -> String {
        let digest =
            Sha256::digest([b"actiongate-audit-key-id\n".as_slice(), &self.secret].concat());
        hex::encode(&digest[..6])
    }

    /// `None` only if HMAC refused the key, which it does for no length.
    fn mac(&self, what: Signed, seq: i64, hash: &str) -> Option<Hmac<Sha256>> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).ok()?;
        let label = match what {
            Signed::Anchor => "anchor",
            Signed::End => "end",
        };
        mac.update(format!("actiongate-audit-{label}-v1\n{seq}\n{hash}").as_bytes());
        Some(mac)
    }

    /// The MAC (hex) over `(seq, hash)`.
    pub fn sign(&self, what: Signed, seq: i64, hash: &str) -> String {
        self.mac(what, seq, hash)
            .map(|m| hex::encode(m.finalize().into_bytes()))
            .unwrap_or_default()
    }

    /// Whether `mac_hex` is the MAC over `(seq, hash)` (compared in
    /// constant time).
    pub fn verify(&self, what: Signed, seq: i64, hash: &str, mac_hex: &str) -> bool {
        match (hex::decode(mac_hex), self.mac(what, seq, hash)) {
            (Ok(bytes), Some(mac)) => mac.verify_slice(&bytes).is_ok(),
            _ => false,
        }
    }
}

/// Where an anchor task got to (on either backend): the chain's (seq,
/// hash) after the events it has hashed, and whether the last of them was
/// an anchor.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub(crate) at: Anchor,
    pub(crate) last_was_anchor: bool,
}

impl Head {
    /// Hashes every event after the head into the chain, reading the log
    /// through `read(after, limit)` about a MiB of events at a time (an
    /// agent's events can be large; 1,000 of them were once read at once).
    pub(crate) async fn follow_log<F, Fut>(&mut self, mut read: F) -> Result<(), StoreError>
    where
        F: FnMut(i64, i64) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<actiongate_api::model::Event>, StoreError>>,
    {
        let mut size = 16;
        loop {
            let page = read(self.at.seq, size).await?;
            if page.is_empty() {
                return Ok(());
            }
            self.follow(&page);
            let bytes = page.iter().map(|ev| ev.data.get().len()).sum();
            size = crate::paging::next_events_page(size, bytes, 1024 * 1024, 1000);
        }
    }

    /// Hashes `events` (the next ones in seq order) into the chain.
    pub(crate) fn follow(&mut self, events: &[actiongate_api::model::Event]) {
        for ev in events {
            self.at.hash = chain_hash(&self.at.hash, &event_content(ev));
            self.at.seq = ev.seq;
            self.last_was_anchor = ev.kind == ANCHOR_EVENT;
        }
    }
}

/// The anchor event signing the chain as it stands at `at`.
pub(crate) fn anchor_event(key: &AuditKey, at: &Anchor) -> Result<NewEvent, StoreError> {
    let data = json!({
        "seq": at.seq,
        "hash": at.hash,
        "key_id": key.id(),
        "mac": key.sign(Signed::Anchor, at.seq, &at.hash),
    });
    Ok(NewEvent {
        kind: ANCHOR_EVENT,
        agent: None,
        action_id: None,
        grant_id: None,
        data: Json::of(&data)?,
    })
}

impl SqliteStore {
    /// Starts the task that appends a signed `audit.anchor` event every
    /// `interval` when events were written since the last one. It stops
    /// with the store.
    pub async fn start_anchors(&self, key: AuditKey, interval: Duration) {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let store = self.clone();
        let key = Arc::new(key);
        let task = tokio::spawn(async move {
            let mut head: Option<Head> = None;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = &mut stopped => return,
                }
                if let Err(e) = store.anchor_once(&key, &mut head).await {
                    // The next round tries again; nothing is lost meanwhile.
                    tracing::warn!(error = %e, "writing an audit anchor failed");
                    head = None;
                }
            }
        });
        // Stopped before the writer, which it uses.
        self.shutdown.lock().await.insert(0, (stop, task));
    }

    /// Hashes the events written since `head` and appends an anchor over
    /// the newest, unless the newest already is one.
    async fn anchor_once(
        &self,
        key: &Arc<AuditKey>,
        head: &mut Option<Head>,
    ) -> Result<(), StoreError> {
        let pruned_to = self.audit_anchor().await?;
        let mut h = match head.take() {
            Some(h) if h.at.seq >= pruned_to.seq => h,
            _ => Head {
                at: pruned_to,
                last_was_anchor: false,
            },
        };
        // Most of the hashing happens here, on a reader, not the writer.
        h.follow_log(|after, n| self.events_after(after, None, n))
            .await?;
        if h.last_was_anchor || h.at.seq == 0 {
            *head = Some(h);
            return Ok(());
        }
        let key = key.clone();
        let from = h.at.clone();
        let signed = self
            .writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let pruned: Option<i64> =
                        sqlx::query_scalar("SELECT seq FROM audit_anchor WHERE id = 1")
                            .fetch_optional(&mut *conn)
                            .await?;
                    if pruned.is_some_and(|p| p > from.seq) {
                        return Err(StoreError::Conflict(
                            "events were pruned meanwhile; anchoring next round".to_owned(),
                        ));
                    }
                    let mut late = Head {
                        at: from,
                        last_was_anchor: false,
                    };
                    late.follow(&after_on(conn, late.at.seq).await?);
                    insert_on(conn, &anchor_event(&key, &late.at)?).await?;
                    Ok(late.at)
                })
            })
            .await?;
        // The anchor event itself is hashed on the next round.
        *head = Some(Head {
            at: signed,
            last_was_anchor: false,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_mac_verifies_only_for_its_seq_hash_kind_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = AuditKey::load_or_create(&dir.path().join("audit.key")).unwrap();
        let again = AuditKey::load_or_create(&dir.path().join("audit.key")).unwrap();
        assert_eq!(key.id(), again.id());
        let mac = key.sign(Signed::Anchor, 7, "ab");
        assert!(again.verify(Signed::Anchor, 7, "ab", &mac));
        assert!(!key.verify(Signed::Anchor, 8, "ab", &mac));
        assert!(!key.verify(Signed::Anchor, 7, "ac", &mac));
        assert!(!key.verify(Signed::End, 7, "ab", &mac));
        let other = AuditKey::load_or_create(&dir.path().join("other.key")).unwrap();
        assert!(!other.verify(Signed::Anchor, 7, "ab", &mac));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("audit.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn an_empty_key_file_is_replaced_and_no_temporary_file_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.key");
        std::fs::write(&path, b"").unwrap();
        let key = AuditKey::load_or_create(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 65);
        assert_eq!(AuditKey::load(&path).unwrap().id(), key.id());
        assert_eq!(AuditKey::load_or_create(&path).unwrap().id(), key.id());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["audit.key"]);
        // A key file with anything in it that is not a key still stops a start.
        std::fs::write(&path, b"x\n").unwrap();
        assert!(AuditKey::load_or_create(&path).is_err());
    }
}
