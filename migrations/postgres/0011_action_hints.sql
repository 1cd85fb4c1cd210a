-- What a handler declares about the action (its `hints`: read_only,
-- destructive, idempotent, open_world), copied onto each action when it is
-- asked so the page's risk badge can use the destructive hint without
-- reading handlers (which only admins may). Shown to humans; the policy
-- never reads it. NULL for tool actions and actions from before.
ALTER TABLE actions ADD COLUMN hints TEXT;
