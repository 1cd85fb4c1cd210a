/**
 * Claude's tool calls (Claude Code, the Claude Agent SDK) as the gate's
 * actions, named exactly as `actiongate hook claude-code` names them, so
 * one profile governs both. The table both are checked against is
 * `crates/cli/tests/claude_calls.json`.
 */
import { ActionGateError } from './errors.js';

/** One action a Claude tool call is asked as. */
export interface ClaudeAction {
  tool: string;
  detail: string;
}

/** What a Claude tool call is asked as: its actions, and why only an operator may allow it, if so. */
export interface ClaudeCalls {
  actions: ClaudeAction[];
  /**
   * Why the call may do more than its actions say (a PowerShell line, which
   * no analyser reads; a command run outside Claude Code's sandbox; an
   * input too large to show whole): sent as the action's `caution`, so no
   * rule or grant allows it, only an operator's approval of it.
   */
  caution?: string;
}

/**
 * The tool names the hooks give known calls (and the presets' and the
 * reference executor's), in any case: another tool named so (a plugin's
 * `git`) must not pass for one of them. It is asked as `other`.
 */
const RESERVED = ['bash', 'sh', 'file', 'Read', 'Glob', 'Grep', 'WebFetch', 'WebSearch', 'mcp', 'mcp-resource', 'mcp-prompt', 'git', 'fs', 'other'];

/** Gate tool names are 1-128 of `[A-Za-z0-9_.-]`; anything else becomes `_` (as the hooks do). */
export function sanitizeTool(name: string): string {
  return name.replace(/[^A-Za-z0-9_.-]/gu, '_').slice(0, 128) || 'unknown';
}

/**
 * `input` as compact JSON with every object's keys in order (by their
 * UTF-8 bytes), as the hooks write a call's input, so a pattern written
 * for one way in matches the other.
 */
export function sortedJson(input: unknown): string {
  const utf8 = new TextEncoder();
  const byBytes = (a: string, b: string): number => {
    const x = utf8.encode(a);
    const y = utf8.encode(b);
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
    return x.length - y.length;
  };
  const sorted = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sorted);
    if (v !== null && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      return Object.fromEntries(Object.keys(o).sort(byBytes).map((k) => [k, sorted(o[k])]));
    }
    return v;
  };
  return JSON.stringify(sorted(input ?? {})) ?? '{}';
}

/**
 * `s` trimmed as JavaScript trims it (Claude Code trims a path so before
 * it resolves it): the same characters the hook trims.
 */
function jsTrim(s: string): string {
  return s.trim();
}

/**
 * A path with `.`, `..` and repeated `/` resolved lexically, as the hooks
 * do, so the action names the file the tool touches: `/repo/../etc/x` is
 * `/etc/x`, which a pattern allowing `/repo/.*` must not cover.
 */
export function normalizePath(path: string): string {
  const win = windowsRoot(path);
  if (win) return `${win[0]}${normalizePath(win[1])}`;
  const absolute = path.startsWith('/');
  // `~` is a directory the runtime expands, not a step a `..` can take
  // back: `~/a/../../x` is above the home directory, not the relative `x`.
  const home = path.startsWith('~');
  const parts: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      const last = parts[parts.length - 1];
      if (last !== undefined && last !== '..' && !(home && parts.length === 1)) parts.pop();
      else if (!absolute) parts.push('..');
      continue;
    }
    parts.push(part);
  }
  const joined = parts.join('/');
  return absolute ? `/${joined}` : joined || '.';
}

/** A drive's root (`C:\`, `c:/`): `C:` and the rest, `\` made `/`. */
function driveRoot(path: string): [string, string] | undefined {
  if (path.length >= 3 && /^[A-Za-z]:[\\/]/u.test(path)) return [`${path[0]!.toUpperCase()}:`, path.slice(2).replace(/\\/gu, '/')];
  return undefined;
}

/** A share's root from `server/share/rest`: `//server/share` and `/rest`. */
function shareRoot(rest: string): [string, string] | undefined {
  const [server, share, ...tail] = rest.split('/');
  if (!server || !share) return undefined;
  return [`//${server}/${share}`, `/${tail.join('/')}`];
}

/**
 * A Windows path from a root, as the hooks read it: the root (`C:`,
 * `//server/share`, or what `\\?\` / `\\.\` name) and the rest from its
 * first separator, `\` made `/`.
 */
function windowsRoot(path: string): [string, string] | undefined {
  const drive = driveRoot(path);
  if (drive) return drive;
  if (!path.startsWith('\\\\')) return undefined;
  const rest = path.slice(2).replace(/\\/gu, '/');
  const verbatim = rest.startsWith('?/') || rest.startsWith('./') ? rest.slice(2) : undefined;
  if (verbatim !== undefined) {
    const unc = verbatim.startsWith('UNC/') || verbatim.startsWith('unc/') ? verbatim.slice(4) : undefined;
    const named = unc !== undefined ? shareRoot(unc) : driveRoot(verbatim);
    return named ?? [`//${rest[0]}`, `/${verbatim}`];
  }
  return shareRoot(rest);
}

/** The home directory the runtime resolves `~` from, when known and absolute. */
function home(): string | undefined {
  const h = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.['HOME'];
  return h?.startsWith('/') ? h : undefined;
}

/**
 * `path` under the working directory `cwd` when it is relative and `cwd`
 * absolute, as the hooks join it: that is where the runtime resolves it.
 * A path from the home directory (`~`, `~/…`) stays as written, unless
 * its `..` climb out of it: then it is resolved from the home directory.
 */
function placed(path: string, cwd?: string): string {
  const joined = cwd !== undefined && (cwd.startsWith('/') || windowsRoot(cwd)) ? join(cwd, path) : path;
  const h = home();
  const n = normalizePath(joined);
  if (h && (n === '~/..' || n.startsWith('~/../'))) return `${h.replace(/\/+$/u, '')}/..${n.slice(4)}`;
  return joined;
}

/**
 * `path` under the absolute `base` when it is relative, as the hooks join
 * it: under a Windows `base` a `\\` separates steps as `/` does, a path
 * from `\\` starts at the root of its drive, and one naming another drive
 * without its root (`D:x`) stays as written.
 */
function join(base: string, path: string): string {
  const root = windowsRoot(base);
  if (root) {
    if (windowsRoot(path)) return path;
    const steps = path.replace(/\\/gu, '/');
    // Two separators of either kind start a share, as Windows reads them.
    if (steps.startsWith('//')) return `\\\\${steps.slice(2)}`;
    if (steps === '~' || steps.startsWith('~/')) return steps;
    if (steps.startsWith('/')) return `${root[0]}${steps}`;
    if (path[1] === ':') return path;
    return `${base.replace(/[\\/]+$/u, '')}/${steps}`;
  }
  if (path.startsWith('/') || path === '~' || path.startsWith('~/')) return path;
  return `${base.replace(/\/+$/u, '')}/${path}`;
}

/**
 * `Glob`'s detail as the hooks spell it: `<dir>/<pattern>` unless the
 * pattern is absolute, its leading steps up to the first one holding a
 * wildcard or an escape resolved as a path is.
 */
function globDetail(pattern: string, dir?: string): string {
  const full = dir && !pattern.startsWith('/') ? `${dir.replace(/\/+$/u, '')}/${pattern}` : pattern;
  let literal = 0;
  for (const step of full.match(/[^/]*\/|[^/]+$/gu) ?? []) {
    if (/[*?[\]{}\\]/u.test(step)) break;
    literal += step.length;
  }
  const head = full.slice(0, literal);
  const rest = full.slice(literal);
  if (!head) return full;
  const h = normalizePath(head);
  if (!rest) return h;
  if (h === '.') return rest;
  return h.endsWith('/') ? `${h}${rest}` : `${h}/${rest}`;
}

/** `name` as one word of a detail: white space and control characters become `_`. */
function oneWord(name: string): string {
  return name ? name.replace(/[\p{White_Space}\p{Cc}]/gu, '_') : '_';
}

/** An edit that creates its file (an empty old string, in the input or any of its `edits`) writes it. */
function editVerb(input: Record<string, unknown>): 'edit' | 'write' {
  const empty = (v: unknown): boolean => v !== null && typeof v === 'object' && (v as Record<string, unknown>)['old_string'] === '';
  const edits = input['edits'];
  return empty(input) || (Array.isArray(edits) && edits.some(empty)) ? 'write' : 'edit';
}

/**
 * Why a path may lead elsewhere than it is asked as, as the hook reads it:
 * a control character in it (a line break: a rule's `.` stops there), or a
 * `..` after a step holding a `:`, which a runtime splitting a patch header
 * at its `:` reads as the step before it.
 */
function unclearPath(path: string): string | undefined {
  if (/\p{Cc}/u.test(path)) return 'a file path holds a control character (a line break, say)';
  const steps = path.split(/[\\/]/u);
  const colonThenUp = steps.some((step, i) => step.includes(':') && !(i === 0 && step.length === 2) && steps.slice(i + 1).includes('..'));
  return colonThenUp ? 'a file path climbs (`..`) out of a step holding a `:`, which a runtime may read as the end of the path' : undefined;
}

/**
 * Why a Claude call may do more than its actions say, as the hook reads
 * it: a PowerShell line, or a command asking to run outside Claude Code's
 * sandbox (which Claude Code asks its user about, and an allow would skip).
 */
function unsure(name: string, input: Record<string, unknown>): string | undefined {
  if (name === 'PowerShell') return 'a PowerShell command, which actiongate cannot analyse; a human must read it';
  // Claude Code reads the flag leniently (`"true"` is true): anything but
  // absent or plainly false counts.
  const flag = input['dangerouslyDisableSandbox'];
  if (flag !== undefined && flag !== null && flag !== false) return 'Claude Code is asked to run this command outside its sandbox (dangerouslyDisableSandbox)';
  return undefined;
}

/**
 * The actions of a Claude tool call, as `actiongate hook claude-code`
 * asks them: `Bash` is `bash` with the command, `Edit`/`Write` are `file`
 * with `edit <path>`/`write <path>` (an edit creating its file writes
 * it), MCP tools are `mcp__<server>__<tool>` with their input as JSON
 * (keys sorted), `Monitor` its command and its socket's URL. Paths are
 * trimmed as Claude Code trims them and, given the session's absolute
 * working directory `cwd`, a relative one is the file under it. A call
 * missing what it needs throws (and is refused).
 */
export function mapClaudeCalls(name: string, input: Record<string, unknown>, cwd?: string): ClaudeCalls {
  const field = (key: string, from: Record<string, unknown> = input): string => {
    const v = from[key];
    if (typeof v !== 'string') throw new ActionGateError(`the ${name} call has no input field \`${key}\``);
    return v;
  };
  const text = (key: string): string | undefined => (typeof input[key] === 'string' ? (input[key] as string) : undefined);
  // Why a path may lead elsewhere than it is asked as (as the hook says).
  let unclear: string | undefined;
  const note = (p: string): string => {
    unclear ??= unclearPath(p);
    return p;
  };
  const path = (key: string): string => normalizePath(note(placed(jsTrim(field(key)), cwd)));
  const one = (tool: string, detail: string): ClaudeAction[] => [{ tool, detail }];
  let actions: ClaudeAction[];
  switch (name) {
    case 'Bash':
      actions = one('bash', field('command'));
      break;
    case 'Edit':
    case 'MultiEdit':
      actions = one('file', `${editVerb(input)} ${path('file_path')}`);
      break;
    case 'Write':
      actions = one('file', `write ${path('file_path')}`);
      break;
    case 'NotebookEdit':
      actions = one('file', `notebook_edit ${path('notebook_path')}`);
      break;
    case 'Read':
      actions = one('Read', path('file_path'));
      break;
    case 'Glob': {
      const given = text('path');
      const trimmed = given === undefined ? undefined : jsTrim(given);
      const dir = trimmed ? note(placed(trimmed, cwd)) : cwd?.startsWith('/') ? cwd : trimmed;
      actions = one('Glob', globDetail(note(field('pattern')), dir));
      break;
    }
    case 'Grep':
      actions = one('Grep', field('pattern'));
      break;
    case 'WebFetch':
      actions = one('WebFetch', field('url'));
      break;
    case 'WebSearch':
      actions = one('WebSearch', field('query'));
      break;
    // A server's resource text is a stranger's: it taints the session.
    case 'ReadMcpResourceTool':
    case 'ReadMcpResourceDirTool':
      actions = one('mcp-resource', `${oneWord(field('server'))} ${field('uri')}`);
      break;
    case 'ListMcpResourcesTool':
      actions = one('mcp-resource', `${oneWord(text('server') ?? '')} *`);
      break;
    case 'PowerShell':
      actions = one('powershell', field('command'));
      break;
    case 'Monitor': {
      actions = [];
      const command = input['command'];
      if (command !== undefined && command !== null) {
        if (typeof command !== 'string') throw new ActionGateError("the Monitor call's command is not a string");
        actions.push({ tool: 'bash', detail: command });
      }
      const ws = input['ws'];
      if (ws !== undefined && ws !== null) {
        if (typeof ws !== 'object') throw new ActionGateError('the Monitor call has no input field `url`');
        actions.push({ tool: 'WebFetch', detail: field('url', ws as Record<string, unknown>) });
      }
      if (actions.length === 0) actions = one('Monitor', sortedJson(input));
      break;
    }
    default: {
      const rest = name.startsWith('mcp__') ? name.slice(5) : undefined;
      const split = rest?.indexOf('__') ?? -1;
      if (rest !== undefined && split > 0 && split + 2 < rest.length) {
        // The MCP proxy's spelling; a name that is not plain as a tool
        // name keeps server and tool in the detail of the tool `mcp`.
        actions = sanitizeTool(name) === name ? one(name, sortedJson(input)) : one('mcp', `${rest} ${sortedJson(input)}`);
      } else {
        const tool = sanitizeTool(name);
        const reserved = RESERVED.some((r) => r.toLowerCase() === tool.toLowerCase());
        actions = reserved ? one('other', `${name} ${sortedJson(input)}`) : one(tool, sortedJson(input));
      }
    }
  }
  const caution = unsure(name, input) ?? unclear;
  return caution ? { actions, caution } : { actions };
}

/**
 * The one action of a Claude tool call ({@link mapClaudeCalls}); throws
 * for a call that is several (a `Monitor` of a command and a socket).
 */
export function mapClaudeTool(name: string, input: Record<string, unknown>, cwd?: string): ClaudeAction {
  const { actions } = mapClaudeCalls(name, input, cwd);
  if (actions.length !== 1 || !actions[0]) throw new ActionGateError(`the ${name} call is ${actions.length} actions`);
  return actions[0];
}

/** Most bytes of one string of a file call's input shown to the humans who decide (as the hook shows it). */
const MAX_SHOWN_STRING = 128 * 1024;
/** Most bytes of a file call's input shown: below the daemon's 256 KiB bound on params. */
const MAX_SHOWN = 192 * 1024;
/** Strings are cut shorter, down to this, until the whole fits. */
const MIN_SHOWN_STRING = 256;

/** The caution of a call whose input was cut to be shown: approving it approves content nobody read. */
export const CUT_CAUTION = 'the tool\'s input is too large to show whole (see "more bytes not shown"): approving it approves content nobody read';

/** `value` with each string past `max` bytes cut, saying how much is not shown. */
function cutStrings(value: unknown, max: number): unknown {
  if (typeof value === 'string') {
    const bytes = new TextEncoder().encode(value);
    if (bytes.length <= max) return value;
    const head = new TextDecoder().decode(bytes.slice(0, max)).replace(/\uFFFD$/u, '');
    return `${head}…[${bytes.length - new TextEncoder().encode(head).length} more bytes not shown]`;
  }
  if (Array.isArray(value)) return value.map((v) => cutStrings(v, max));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, cutStrings(v, max)]));
  }
  return value;
}

/**
 * What a Claude file call (`Edit`, `MultiEdit`, `Write`, `NotebookEdit`)
 * shows the humans who decide, as `actiongate hook claude-code` sends it:
 * its input, long strings cut (shorter still while the whole is too
 * large); undefined for any other call (its detail is the whole call).
 */
export function claudeParams(name: string, input: Record<string, unknown>): Record<string, unknown> | undefined {
  if (!['Edit', 'MultiEdit', 'Write', 'NotebookEdit'].includes(name)) return undefined;
  return shownInput(input);
}

/** A call's input as the humans who decide are shown it: long strings cut, the whole within the daemon's bound on params. */
export function shownInput(input: Record<string, unknown>): Record<string, unknown> {
  for (let max = MAX_SHOWN_STRING; max >= MIN_SHOWN_STRING; max /= 2) {
    let size = Infinity;
    const shown = cutStrings(input, max) as Record<string, unknown>;
    try {
      size = new TextEncoder().encode(JSON.stringify(shown)).length;
    } catch {
      break;
    }
    if (size <= MAX_SHOWN) return shown;
  }
  return { not_shown: "the tool's input is too large to show" };
}

/** The caution of params {@link claudeParams} cut, if it cut any. */
export function cutCaution(params: unknown): string | undefined {
  const cut = (v: unknown): boolean => {
    if (typeof v === 'string') return v.endsWith(' more bytes not shown]');
    if (Array.isArray(v)) return v.some(cut);
    if (v && typeof v === 'object') return 'not_shown' in v || Object.values(v).some(cut);
    return false;
  };
  return cut(params) ? CUT_CAUTION : undefined;
}
