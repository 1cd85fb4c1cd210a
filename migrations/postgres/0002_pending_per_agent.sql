-- How many items one agent has waiting for a human (limits.max_pending_per_agent),
-- counted on every request that would add one.
CREATE INDEX actions_pending_agent ON actions (agent) WHERE status = 'pending';
CREATE INDEX grant_requests_pending_agent ON grant_requests (agent) WHERE status = 'pending';
