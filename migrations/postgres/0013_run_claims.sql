-- A reported run (`POST /v1/runs`) claims the allowed or approved action
-- that covers it: one decision covers one run, so a second identical run
-- with no decision of its own is reported as undecided. Claims older than
-- the runs' look-back are pruned as new ones are made.
CREATE TABLE run_claims (
    action_id  TEXT PRIMARY KEY,
    claimed_at BIGINT NOT NULL
);
CREATE INDEX run_claims_at ON run_claims (claimed_at);
