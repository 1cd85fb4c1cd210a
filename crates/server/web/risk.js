// What an action may do, for the card's risk badge: the daemon's
// `findings` (its policy analyser's reading of the command: deletes,
// writes, network, runs commands), and for actions from before it sent
// them, the command text (shell words), the handler's action and
// permission names and the policy's reason read here. Pure, so it is
// tested in node (tests/web/units.test.mjs).

const START = String.raw`(?:^|[\s;&|(\x60]|\$\()`;
const DELETES = new RegExp(`${START}(?:sudo\\s+)?(?:rm|rmdir|shred|unlink|truncate|mkfs\\S*|dd|wipefs)(?=\\s|$)`
  + String.raw`|\bgit\s+(?:reset\s+--hard|clean\s+-\S*f|push\s+(?:\S+\s+)*(?:--force|-f)\b|branch\s+-D)`
  + String.raw`|\b(?:drop|truncate)\s+(?:table|database|schema)\b|\bdelete\s+from\b|\bkubectl\s+delete\b|--delete\b`, 'i');
const NETWORK = new RegExp(`${START}(?:curl|wget|ssh|scp|sftp|rsync|nc|ncat|telnet|ftp|http|https|xh)(?=\\s|$)`
  + String.raw`|\bgit\s+(?:push|fetch|pull|clone)\b|\b(?:npm|cargo|twine|gem)\s+publish\b|\bdocker\s+push\b|https?://`, 'i');
const WRITES = new RegExp(String.raw`(?:^|[^<>2&])>{1,2}\s*[^&\s]`
  + `|${START}(?:sudo\\s+)?(?:tee|mv|cp|chmod|chown|mkdir|touch|ln|install|patch|sed\\s+-i\\S*|npm\\s+(?:i|install)|pip3?\\s+install|apt(?:-get)?\\s+install)(?=\\s|$)`
  + String.raw`|\bgit\s+(?:commit|merge|rebase|checkout|add|tag)\b`, 'i');
const NAME_DELETES = /\b(?:delete|remove|drop|destroy|purge|wipe|erase)|(?:^|[._-])(?:rm|del)(?:$|[._-])/i;
const NAME_NETWORK = /\b(?:net|http|mail|email|send|post|webhook|publish|upload|message|notify)|(?:^|[._-])(?:send|post|net|mail)/i;
const NAME_WRITES = /write|create|update|edit|exec|execute|run|put|append|move|rename|deploy|install|command/i;
const HAZARD = /hazard|substitution|redirect|runs commands|writing option|unparsable|hidden command/i;

/** The daemon's finding names, in words. */
const FINDING_WORDS = { deletes: 'deletes', writes: 'writes', network: 'network', runs_commands: 'runs commands', unclear: 'not fully analysed' };

/**
 * `{level, findings, source}`: level 'high' (deletes, or a deny-list
 * rule), 'medium' (anything else found), 'low'. The findings are the
 * daemon's (`action.findings`, its analyser's reading of the command,
 * source 'analyser'); an action from before the daemon sent them is
 * read here (source 'page').
 */
export function riskOf(action) {
  const rule = action.decision?.rule;
  const denyRule = rule && rule.kind === 'pattern' && rule.list === 'deny';
  const risk = Array.isArray(action.findings) ? analyserRisk(action, denyRule) : pageRisk(action, denyRule);
  return withHints(risk, action.hints);
}

/** The daemon's findings, in words. */
function analyserRisk(action, denyRule) {
  const findings = action.findings.map((f) => FINDING_WORDS[f] || String(f));
  const level = action.findings.includes('deletes') || denyRule ? 'high'
    : findings.length ? 'medium' : 'low';
  return { level, findings, source: 'analyser' };
}

/**
 * A handler's own word on its action (`action.hints`, copied from its
 * spec when the action was asked) only ever raises the level: a
 * destructive action is high, one that reaches the outside world is at
 * least medium. A hint never lowers what was found (an executor's
 * `read_only` is its claim, not a reading).
 */
function withHints(risk, hints) {
  if (!hints || typeof hints !== 'object' || hints.read_only === true) return risk;
  const findings = [...risk.findings];
  let { level } = risk;
  if (hints.destructive === true) {
    findings.push('destructive (handler)');
    level = 'high';
  }
  if (hints.open_world === true) {
    if (!findings.includes('network')) findings.push('open world (handler)');
    if (level === 'low') level = 'medium';
  }
  return { ...risk, level, findings };
}

/** The fallback for old actions: the command text read with patterns. */
function pageRisk(action, denyRule) {
  const detail = String(action.detail ?? '');
  const names = `${action.action ?? ''} ${action.permission ?? ''}`;
  const findings = [];
  if (DELETES.test(detail) || NAME_DELETES.test(names)) findings.push('deletes');
  if (WRITES.test(detail) || NAME_WRITES.test(names)) findings.push('writes');
  if (NETWORK.test(detail) || NAME_NETWORK.test(names)) findings.push('network');
  const reason = String(action.decision?.reason ?? '');
  if (HAZARD.test(reason)) findings.push('shell hazard');
  const level = findings.includes('deletes') || denyRule ? 'high'
    : findings.length ? 'medium' : 'low';
  return { level, findings, source: 'page' };
}

/** The rule that decided, as a short phrase: `ask pattern #3 (tool:bash:.*)`,
 * numbered from 0 as the daemon's reasons number them. */
export function ruleText(rule) {
  if (!rule || typeof rule !== 'object') return null;
  if (rule.kind === 'pattern') return `${rule.list} pattern #${rule.index} (${rule.pattern})`;
  if (rule.kind === 'grant') return `grant ${rule.id}`;
  if (rule.kind === 'default') return 'no rule matched (default)';
  return rule.kind ? String(rule.kind) : null;
}
