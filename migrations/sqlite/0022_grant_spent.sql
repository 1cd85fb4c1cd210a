-- When a count-limited grant gave its last use: retention (`records.retention`)
-- deletes a used-up grant that long after, as it does a revoked or expired
-- one. Used-up grants from before this migration count from when granted.
ALTER TABLE grants ADD COLUMN spent_at INTEGER;
