-- A decision-only action decided when it was asked may have its first
-- event stored by reference: the event's JSON is rendered from these
-- columns whenever it is read (crates/store/src/event_ref.rs). They never
-- change once an action is decided; this makes sure of it, so that no
-- later write can change what an old event says (the audit chain hashes
-- it, and its anchors are signed). A pending action's may still change
-- (an approver's edit); such an action's events keep their JSON.
CREATE TRIGGER actions_decided_columns_stay
BEFORE UPDATE OF id, agent, tool, detail, action_string, reason, decision_result,
    decision_reason, decision_rule, created_at, decided_by, params_view, session, runtime
ON actions
WHEN OLD.status <> 'pending' AND (
    NEW.id IS NOT OLD.id OR NEW.agent IS NOT OLD.agent OR NEW.tool IS NOT OLD.tool
    OR NEW.detail IS NOT OLD.detail OR NEW.action_string IS NOT OLD.action_string
    OR NEW.reason IS NOT OLD.reason OR NEW.decision_result IS NOT OLD.decision_result
    OR NEW.decision_reason IS NOT OLD.decision_reason
    OR NEW.decision_rule IS NOT OLD.decision_rule OR NEW.created_at IS NOT OLD.created_at
    OR NEW.decided_by IS NOT OLD.decided_by OR NEW.params_view IS NOT OLD.params_view
    OR NEW.session IS NOT OLD.session OR NEW.runtime IS NOT OLD.runtime)
BEGIN
    SELECT RAISE(ABORT, 'a decided action''s asked columns do not change');
END;

-- Nor may such an action be deleted while an event still refers to it:
-- retention writes those events' JSON out in full first.
CREATE TRIGGER actions_referred_stay
BEFORE DELETE ON actions
WHEN OLD.status <> 'pending' AND EXISTS (
    SELECT 1 FROM events WHERE action_id = OLD.id AND substr(data, 1, 1) = '@')
BEGIN
    SELECT RAISE(ABORT, 'an action an event refers to is not deleted');
END;
