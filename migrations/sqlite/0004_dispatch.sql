-- Dispatch of approved handler actions to executors: attempts, leases,
-- retry schedule, replay protection of result callbacks, secret rotation.

ALTER TABLE actions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
-- JSON array of {n, at, status_code?, error?, duration_ms}
ALTER TABLE actions ADD COLUMN attempt_log TEXT;
-- A running action's lease: past it, the attempt is presumed lost.
ALTER TABLE actions ADD COLUMN lease_until INTEGER;
-- When an approved handler action is next due for dispatch.
ALTER TABLE actions ADD COLUMN next_attempt_at INTEGER;

CREATE INDEX actions_dispatch_due ON actions (next_attempt_at)
    WHERE status = 'approved' AND handler IS NOT NULL;
CREATE INDEX actions_running_lease ON actions (lease_until)
    WHERE status = 'running';

-- webhook-ids of result callbacks already accepted (replays are refused).
CREATE TABLE seen_webhooks (
    id  TEXT PRIMARY KEY,
    at  INTEGER NOT NULL
);

ALTER TABLE handlers ADD COLUMN previous_secret TEXT;
ALTER TABLE handlers ADD COLUMN previous_secret_until INTEGER;
