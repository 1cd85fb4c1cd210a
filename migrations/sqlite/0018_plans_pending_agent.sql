-- An agent's pending plans count toward `limits.max_pending_per_agent`
-- with its actions and grant requests; this finds them by agent.
CREATE INDEX plans_pending_agent ON plans (agent) WHERE status = 'pending';
