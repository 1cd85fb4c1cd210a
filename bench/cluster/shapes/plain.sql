BEGIN;
INSERT INTO actions VALUES (gen_random_uuid()::TEXT, 'bench', repeat('x', 400));
INSERT INTO events (seq, id, type, at, agent, action_id, data) VALUES (nextval('plain_seq'), gen_random_uuid()::TEXT, 'action.created', 1, 'bench', 'a', repeat('y', 600));
COMMIT;
