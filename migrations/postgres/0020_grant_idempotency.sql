-- An operator's idempotency key for a grant: the same key from the same
-- operator with the same request returns the grant made the first time
-- (a retry after a lost answer grants nothing twice); with another request
-- it is a conflict. `request_hash` is the SHA-256 of the request as sent.
ALTER TABLE grants ADD COLUMN idempotency_key TEXT;
ALTER TABLE grants ADD COLUMN request_hash TEXT;
CREATE UNIQUE INDEX grants_idempotency ON grants (granted_by, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
