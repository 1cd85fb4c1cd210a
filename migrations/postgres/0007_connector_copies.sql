-- Every message of an item a chat is known to hold. A post whose answer
-- was lost (the chat took it, the answer never came back) is posted again,
-- and where the chat cannot make that idempotent (Telegram, WhatsApp) the
-- item then has several messages; each one whose id becomes known (from
-- the post's answer, or from a tap on it or a reply to it) is a row here,
-- and the item's outcome edits every one (`edited` once that edit went
-- out or was given up).
CREATE TABLE connector_copies (
    chat         TEXT NOT NULL,
    message_ref  TEXT NOT NULL,
    item         TEXT NOT NULL,
    edited       BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (chat, message_ref)
);
CREATE INDEX connector_copies_item ON connector_copies (item, chat);

-- The messages known so far; one whose outcome edit is still queued is
-- not edited yet.
INSERT INTO connector_copies (chat, message_ref, item, edited, created_at)
SELECT m.chat, m.message_ref, m.item,
       CASE WHEN m.settled = 1 AND NOT EXISTS (
              SELECT 1 FROM connector_outbox o
              WHERE o.chat = m.chat AND o.item = m.item AND o.kind = 'edit')
            THEN 1 ELSE 0 END,
       m.created_at
FROM connector_messages m WHERE m.message_ref IS NOT NULL;
