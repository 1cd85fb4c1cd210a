BEGIN;
INSERT INTO actions VALUES (gen_random_uuid()::TEXT, 'bench', repeat('x', 400));
INSERT INTO event_queue (pos, n, id, type, at, agent, action_id, data) VALUES (nextval('event_pos'), 1, gen_random_uuid()::TEXT, 'action.created', 1, 'bench', 'a', repeat('y', 600)) RETURNING pos \gset
COMMIT;
SELECT first, upto FROM actiongate_sequence(:pos, 'n');
