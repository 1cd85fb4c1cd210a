-- Escalation tiers of subscriptions (docs/teams.md): tier 1 (every
-- subscription so far) is sent every event its `types` match; tier 2 only
-- `action.escalated`, like a chat connector of tier 2.
ALTER TABLE subscriptions ADD COLUMN tier BIGINT NOT NULL DEFAULT 1;
