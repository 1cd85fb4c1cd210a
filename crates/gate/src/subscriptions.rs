//! Outbound notification webhooks: what admins subscribe, and the record
//! of what was delivered. Delivery itself is [`crate::notify`]'s.

use actiongate_store::{Delivery, DeliveryStatus, NewSubscription, Role, StoreError, Subscription};

use crate::{Caller, Gate, GateError, GateResult};

fn not_found(id: &str) -> impl FnOnce(StoreError) -> GateError + '_ {
    move |e| match e {
        StoreError::NotFound => GateError::not_found(format!("no subscription '{id}'")),
        other => other.into(),
    }
}

impl Gate {
    /// Subscribes `url` to events of `types` (already checked) at escalation
    /// `tier` (1: all of them; 2: only `action.escalated`); the new signing
    /// secret is in the answer only.
    pub async fn create_subscription(
        &self,
        caller: &Caller,
        url: String,
        types: Vec<String>,
        description: Option<String>,
        tier: u8,
    ) -> GateResult<(Subscription, String)> {
        caller.require(Role::Admin)?;
        if !matches!(tier, 1 | 2) {
            return Err(GateError::invalid(
                "tier",
                "1 (every event) or 2 (only action.escalated)",
            ));
        }
        self.config()
            .outbound
            .check_url(&url)
            .map_err(|e| GateError::invalid("url", e))?;
        let secret = crate::sign::new_secret();
        let subscription = self
            .store()
            .create_subscription(NewSubscription {
                id: format!("sub_{}", uuid::Uuid::now_v7().simple()),
                url,
                types,
                description,
                secret: secret.clone(),
                tier,
            })
            .await?;
        Ok((subscription, secret))
    }

    /// Every subscription.
    pub async fn list_subscriptions(&self, caller: &Caller) -> GateResult<Vec<Subscription>> {
        caller.require(Role::Admin)?;
        Ok(self.store().list_subscriptions().await?)
    }

    /// One subscription.
    pub async fn get_subscription(&self, caller: &Caller, id: &str) -> GateResult<Subscription> {
        caller.require(Role::Admin)?;
        self.store()
            .get_subscription(id)
            .await
            .map_err(not_found(id))
    }

    /// Ends a subscription; what it had pending is not sent.
    pub async fn delete_subscription(&self, caller: &Caller, id: &str) -> GateResult<()> {
        caller.require(Role::Admin)?;
        self.store()
            .delete_subscription(id)
            .await
            .map_err(not_found(id))
    }

    /// A page of a subscription's deliveries (newest event first) and the
    /// cursor of the next page.
    pub async fn list_deliveries(
        &self,
        caller: &Caller,
        id: &str,
        status: Option<DeliveryStatus>,
        cursor: Option<i64>,
        limit: i64,
    ) -> GateResult<(Vec<Delivery>, Option<i64>)> {
        caller.require(Role::Admin)?;
        if !(1..=200).contains(&limit) {
            return Err(GateError::invalid("limit", "must be 1-200"));
        }
        self.store()
            .get_subscription(id)
            .await
            .map_err(not_found(id))?;
        let mut items = self
            .store()
            .list_deliveries(id, status, cursor, limit + 1)
            .await?;
        let next = if items.len() as i64 > limit {
            items.truncate(limit as usize);
            items.last().map(|d| d.event_seq)
        } else {
            None
        };
        Ok((items, next))
    }
}
