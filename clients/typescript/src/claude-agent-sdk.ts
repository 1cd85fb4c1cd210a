/**
 * Gate a Claude Agent SDK (`@anthropic-ai/claude-agent-sdk`) session through
 * actiongate, with the SDK's own permission callback, `canUseTool`, and its
 * `PreToolUse` hook.
 *
 * ```ts
 * import { query } from '@anthropic-ai/claude-agent-sdk';
 * import { Client } from 'actiongate';
 * import { canUseTool } from 'actiongate/claude-agent-sdk';
 *
 * for await (const m of query({ prompt, options: { canUseTool: canUseTool(new Client()) } })) { ... }
 * ```
 *
 * Tool calls are named as `actiongate hook claude-code` names them (`Bash`
 * is `bash` with the command, `Edit` is `file` `edit <path>`, ...), so one
 * profile governs Claude Code and the SDK; a call the hook would leave to
 * an operator alone (a PowerShell line, a command run outside the
 * sandbox, an input too large to show) is left to one here too. The `PreToolUse` hook is given
 * the session's `cwd`, so a relative path is asked as the file under it,
 * as the Claude Code hook asks it; `canUseTool` is given no working
 * directory by the SDK, so there a relative path is asked as written.
 * Allowed: `{behavior: 'allow'}`
 * with the input unchanged; asked: waits for an operator (bounded by
 * `wait`); denied, timed out or unreachable: `{behavior: 'deny', message}`
 * with the reason, which Claude reads.
 */
import type { CanUseTool, HookCallback, PermissionResult } from '@anthropic-ai/claude-agent-sdk';
import type { Client } from './client.js';
import { Gatekeeper, failed } from './adapters.js';
import type { GatekeeperOptions, ToolCall, Verdict } from './adapters.js';
import { claudeParams, cutCaution, mapClaudeCalls } from './claude-tools.js';

export type { GatekeeperOptions } from './adapters.js';

/**
 * The gate's actions of one Claude tool call: a tool named in
 * `options.tools` is spelled as given there; every other one as the Claude
 * Code hook spells it (a malformed call throws: denied), with the hook's
 * caution where the call may do more than its actions say.
 */
function toCalls(keeper: Gatekeeper, options: GatekeeperOptions, name: string, input: Record<string, unknown>, cwd?: string): ToolCall[] {
  const reason = options.reason ?? `Claude Agent SDK calls ${name}`;
  if (options.tools?.[name]) return [{ ...keeper.call(name, input), reason }];
  const { actions, caution } = mapClaudeCalls(name, input, cwd);
  const params = claudeParams(name, input);
  const cut = cutCaution(params);
  const why = caution && cut ? `${caution.slice(0, 300)}; ${cut}` : (caution ?? cut);
  return actions.map((a) => ({ tool: a.tool, detail: a.detail, reason, params, ...(why ? { caution: why } : {}) }));
}

/** Every action of a call approved, or the first refusal. */
async function decideEach(keeper: Gatekeeper, calls: ToolCall[], signal?: AbortSignal): Promise<Verdict> {
  let verdict: Verdict = { approved: false, message: 'Not run: the call names no action.' };
  for (const call of calls) {
    verdict = await keeper.decide(call, signal);
    if (!verdict.approved) return verdict;
  }
  return verdict;
}

/** The `canUseTool` callback of a Claude Agent SDK `query`. */
export function canUseTool(gate: Client | Gatekeeper, options: GatekeeperOptions = {}): CanUseTool {
  const keeper = gate instanceof Gatekeeper ? gate : new Gatekeeper(gate, options);
  return async (toolName, input, { signal, toolUseID }): Promise<PermissionResult> => {
    let calls: ToolCall[];
    try {
      calls = toCalls(keeper, options, toolName, input);
    } catch (e) {
      return { behavior: 'deny', message: failed(e).message, ...(toolUseID ? { toolUseID } : {}) };
    }
    const verdict = await decideEach(keeper, calls, signal);
    if (verdict.approved) return { behavior: 'allow', updatedInput: input, ...(toolUseID ? { toolUseID } : {}) };
    return { behavior: 'deny', message: verdict.message, ...(toolUseID ? { toolUseID } : {}) };
  };
}

/**
 * A `PreToolUse` hook callback for the SDK's `hooks` option: the same
 * decision, answered as `hookSpecificOutput.permissionDecision` (`allow` or
 * `deny` with its reason). Each call is asked in Claude's own session
 * (`session_id`, unless the gatekeeper was given a `session`), so what an
 * earlier call of that session read taints it, as with the Claude Code hook.
 */
export function preToolUseHook(gate: Client | Gatekeeper, options: GatekeeperOptions = {}): HookCallback {
  const keeper = gate instanceof Gatekeeper ? gate : new Gatekeeper(gate, options);
  return async (input, _toolUseID, { signal }) => {
    if (input.hook_event_name !== 'PreToolUse') return {};
    const toolInput = (input.tool_input ?? {}) as Record<string, unknown>;
    let calls: ToolCall[];
    try {
      calls = toCalls(keeper, options, input.tool_name, toolInput, input.cwd);
    } catch (e) {
      return { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'deny', permissionDecisionReason: failed(e).message } };
    }
    // The call belongs to Claude's session, as the Claude Code hook puts it:
    // what an earlier call of that session read taints it.
    const sid = input.session_id;
    if (typeof sid === 'string' && sid) calls = calls.map((c) => ({ ...c, session: sid }));
    const verdict = await decideEach(keeper, calls, signal);
    return {
      hookSpecificOutput: {
        hookEventName: 'PreToolUse',
        permissionDecision: verdict.approved ? 'allow' : 'deny',
        permissionDecisionReason: verdict.approved ? 'allowed by actiongate' : verdict.message,
      },
    };
  };
}
