-- An agent's idempotency key for a grant request: the same key from the
-- same agent with the same request returns the request made the first time
-- (a retry after a lost answer asks no human twice); with another request
-- it is a conflict. `request_hash` is the SHA-256 of the request as sent.
ALTER TABLE grant_requests ADD COLUMN idempotency_key TEXT;
ALTER TABLE grant_requests ADD COLUMN request_hash TEXT;
CREATE UNIQUE INDEX grant_requests_idempotency ON grant_requests (agent, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
