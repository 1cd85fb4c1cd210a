-- Pending plans: an agent's count toward `limits.max_pending_per_agent`
-- with its actions and grant requests (found by agent), and a plan still
-- pending when its session ends expires with it (status `expired`).
ALTER TABLE plans DROP CONSTRAINT plans_status_check;
ALTER TABLE plans ADD CONSTRAINT plans_status_check
    CHECK (status IN ('pending', 'approved', 'denied', 'expired'));
CREATE INDEX plans_pending_agent ON plans (agent) WHERE status = 'pending';
