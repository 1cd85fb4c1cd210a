-- Approvals for teams (docs/teams.md): people, and on each action the
-- record of its team decision.
--
-- `team` holds, as JSON, the approvals given so far (who, which person,
-- through which channel, when), how many the action needed, the person
-- and channel of the final decision, an edit made before approving (what
-- was asked, masked), and when it was escalated. It is written only in
-- the transaction that checks the action is still pending, so two
-- approvals at once are counted once each and settle it once.

ALTER TABLE actions ADD COLUMN team TEXT;

CREATE TABLE people (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    body        TEXT NOT NULL,               -- JSON: groups, keys, chat ids
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

-- Each identity (`key:<id>`, `telegram:<user id>`, `slack:<user id>`,
-- `discord:<user id>`, `whatsapp:<number>`) belongs to one person at most.
CREATE TABLE person_identities (
    identity   TEXT PRIMARY KEY,
    person_id  TEXT NOT NULL REFERENCES people (id) ON DELETE CASCADE
);
CREATE INDEX person_identities_person ON person_identities (person_id);
