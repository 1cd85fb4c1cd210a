-- The MCP key session (`mcp-…` of an agent key) that named a session over
-- /mcp first: a taint recorded on the session later (an approval outside
-- the call, a task) is recorded on it too, so every daemon, and this one
-- after a restart, carries it into the next session the key names
-- (docs/sessions.md).
ALTER TABLE sessions ADD COLUMN carrier TEXT;
