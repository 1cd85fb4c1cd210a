//! Signed audit anchors on Postgres (see `crate::anchor` for what they
//! prove). Every node runs the anchor task; they share one log.
//!
//! An anchor signs the chain hash of the event just before it, so nothing
//! may be numbered between the hashing and the anchor: the transaction
//! takes the sequencer's lock first (every sequencing pass holds it, see
//! `log`), hashes what was numbered since the last pass, and appends the
//! anchor with the next seq under the same lock. It holds the anchor row `FOR SHARE`, so
//! retention on another node cannot prune what it is hashing. When the
//! newest event already is an anchor (another node's), it writes none.

use std::sync::Arc;
use std::time::Duration;

use crate::anchor::{AuditKey, Head, anchor_event};
use crate::error::StoreError;
use crate::events::{event_columns, from_row};
use crate::pg::Postgres;
use crate::pg::audit::lock_anchor;

impl Postgres {
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
        // Stopped before the pool closes.
        self.shutdown.lock().await.insert(0, (stop, task));
    }

    /// Hashes the events committed since `head` and appends an anchor over
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
        // Most of the hashing happens here, holding no lock.
        h.follow_log(|after, n| self.events_after(after, None, n))
            .await?;
        if h.last_was_anchor || h.at.seq == 0 {
            *head = Some(h);
            return Ok(());
        }
        let mut tx = self.begin().await?;
        let pruned = lock_anchor(&mut tx, false).await?;
        if pruned.seq > h.at.seq {
            return Err(StoreError::Conflict(
                "events were pruned meanwhile; anchoring next round".to_owned(),
            ));
        }
        // Nothing is numbered from here until this transaction ends.
        sqlx::query(crate::pg::log::LOCK_SEQUENCER)
            .execute(&mut *tx)
            .await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE seq > $1 ORDER BY seq"
        ))
        .bind(h.at.seq)
        .fetch_all(&mut *tx)
        .await?;
        let late = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
        h.follow(&late);
        if h.last_was_anchor {
            // Another node anchored this very point.
            self.commit(tx, Vec::new()).await?;
            *head = Some(h);
            return Ok(());
        }
        let result = async {
            let written = crate::pg::log::append_numbered(
                &mut tx,
                vec![anchor_event(key, &h.at)?],
                &self.node,
            )
            .await?;
            tx.commit().await?;
            Ok::<_, StoreError>(written)
        }
        .await;
        let written = result?;
        let upto = written.last().map_or(0, |e| e.seq);
        self.published(written, upto).await?;
        // The anchor event itself is hashed on the next round.
        h.last_was_anchor = false;
        *head = Some(h);
        Ok(())
    }
}
