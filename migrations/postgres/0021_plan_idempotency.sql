-- An agent's idempotency key for a plan: the same key from the same agent
-- with the same request returns the plan made the first time (a retry
-- after a lost answer asks no human twice); with another request it is a
-- conflict. `request_hash` is the SHA-256 of the request as sent.
ALTER TABLE plans ADD COLUMN idempotency_key TEXT;
ALTER TABLE plans ADD COLUMN request_hash TEXT;
CREATE UNIQUE INDEX plans_idempotency ON plans (agent, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
