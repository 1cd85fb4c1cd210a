-- Chat connectors (Telegram, Slack, Discord, WhatsApp): what they send and
-- what they have seen, so that a restart neither loses nor repeats them.
--
-- `connector_messages`: one row per pending item (an action id, or
-- `gr:<id>` for a grant request) and chat (`telegram`, `slack`, `discord`,
-- `whatsapp:<phone>`), made when its message is queued; `message_ref` is
-- the chat's id of the message once sent (what an edit names, and what a
-- reply to it points at); `settled` once its outcome edit was queued.
CREATE TABLE connector_messages (
    chat         TEXT NOT NULL,
    item         TEXT NOT NULL,
    message_ref  TEXT,
    settled      INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    -- Item first: each outcome looks up the chats of one item.
    PRIMARY KEY (item, chat)
);
CREATE INDEX connector_messages_ref ON connector_messages (chat, message_ref);

-- Outgoing messages: posted or edited until the chat's API accepts them,
-- retried with backoff; a row is deleted once sent or given up.
CREATE TABLE connector_outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    chat             TEXT NOT NULL,
    item             TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind = 'post' OR kind = 'edit'),
    body             TEXT NOT NULL,            -- JSON: the rendered card
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    last_error       TEXT,
    created_at       INTEGER NOT NULL
);
CREATE INDEX connector_outbox_due ON connector_outbox (next_attempt_at);

-- Small values a connector keeps (Telegram's update offset).
CREATE TABLE connector_state (
    chat   TEXT NOT NULL,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (chat, key)
);

-- Interaction ids already handled (a tap or a reply delivered twice is
-- handled once).
CREATE TABLE connector_seen (
    chat         TEXT NOT NULL,
    interaction  TEXT NOT NULL,
    seen_at      INTEGER NOT NULL,
    PRIMARY KEY (chat, interaction)
);
