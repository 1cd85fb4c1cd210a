-- `actions_status` finds the actions of one status, newest first. It no
-- longer holds approved actions.
--
-- Most actions an agent asks for are allowed by its profile and stay
-- `approved`, and every index entry costs each of them a b-tree insert in
-- the writer's hottest statement, plus its share of the pages each commit
-- rewrites: appending to an index splits its last pages often, so one
-- index accounts for about 3.5 of the 28 pages a commit of 25 new actions
-- writes to the WAL (and later copies into the database file). A listing
-- of approved actions walks the table newest first instead, which meets
-- them at once wherever they are common; every other status, the ones an
-- operator looks for, keeps its index. The query names the condition so
-- that SQLite knows the index applies (`Store::list_actions`).
--
-- The index is built again from the table: on a large database this takes
-- a while.

DROP INDEX actions_status;
CREATE INDEX actions_status ON actions (status, id) WHERE status <> 'approved';
