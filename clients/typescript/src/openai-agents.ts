/**
 * Gate the function tools of an OpenAI Agents SDK for TypeScript
 * (`@openai/agents`) run through actiongate, with the SDK's own approval
 * flow: a tool's `needsApproval` and the run's `interruptions`, approved or
 * rejected on its `RunState`.
 *
 * ```ts
 * import { Agent, tool } from '@openai/agents';
 * import { Client } from 'actiongate';
 * import { AgentsGate } from 'actiongate/openai-agents';
 *
 * const gate = new AgentsGate(new Client(), { wait: 300 });
 * const rm = tool({ name: 'delete_file', parameters, execute,
 *   needsApproval: gate.needsApproval('delete_file') });
 * const result = await gate.run(runner, agent, 'clean up');  // resolves interruptions
 * ```
 *
 * `needsApproval` asks the gate's policy: a call it allows is recorded as
 * an action (taking a counted grant's use or a plan step) and runs without
 * an interruption; everything else (asked, denied, a use taken meanwhile,
 * or a gate that cannot answer) interrupts. {@link AgentsGate.resolve} then records each
 * interrupted call as an action, waits (bounded) for the operators, and
 * approves or rejects it with the reason as the message the model reads.
 */
import type { Client } from './client.js';
import { Gatekeeper, failed } from './adapters.js';
import type { GatekeeperOptions, ToolCall, Verdict } from './adapters.js';
import { sanitizeTool, sortedJson } from './claude-tools.js';

export type { GatekeeperOptions } from './adapters.js';

/** What this adapter reads of a `RunToolApprovalItem`. */
interface ApprovalItem {
  name?: string | undefined;
  arguments?: string | undefined;
  agent?: { name?: string };
  rawItem?: unknown;
}

/** What this adapter uses of a `RunState`. */
interface ApprovalState {
  approve(item: any, options?: { alwaysApprove?: boolean }): void;
  reject(item: any, options?: { alwaysReject?: boolean; message?: string }): void;
}

/** What this adapter uses of a run result. */
interface InterruptedResult {
  interruptions?: ApprovalItem[];
  state: ApprovalState;
}

/** Keys of a call that name it rather than say what it does. */
const CALL_IDS = new Set(['id', 'callId', 'call_id', 'itemId', 'item_id', 'status']);

/** `o` without the keys that only name it. */
function withoutIds(o: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => !CALL_IDS.has(k)));
}

/**
 * What an approval item's call would do: a function call's arguments, or,
 * for a call that has none (a shell command, a patch, a computer action),
 * the call itself, ids aside (what the provider keeps of it too). `undefined` when neither can be read.
 */
function described(item: ApprovalItem): Record<string, unknown> | undefined {
  if (typeof item.arguments === 'string') return parseArguments(item.arguments);
  const call = item.rawItem;
  if (!call || typeof call !== 'object' || Array.isArray(call)) return undefined;
  const what = withoutIds(call);
  const provider = what['providerData'];
  if (provider && typeof provider === 'object' && !Array.isArray(provider)) what['providerData'] = withoutIds(provider);
  return Object.keys(what).some((k) => k !== 'type') ? what : undefined;
}

/**
 * A hosted MCP tool's approval request, asked as the MCP proxy and the
 * hooks name an MCP tool: `mcp__<server>__<tool>` with its arguments (keys
 * sorted), so one rule governs the tool whichever way it is called. The
 * SDK keeps server, tool and arguments in the call's `providerData`.
 * `undefined` for any other call; `null` for one naming no server or tool.
 */
function hostedMcp(item: ApprovalItem): { tool: string; detail: string } | null | undefined {
  const raw = item.rawItem as Record<string, unknown> | undefined;
  if (!raw || typeof raw !== 'object' || raw['type'] !== 'hosted_tool_call') return undefined;
  const data = raw['providerData'] as Record<string, unknown> | undefined;
  if (!data || typeof data !== 'object') return undefined;
  if (data['type'] !== undefined && data['type'] !== 'mcp_approval_request') return undefined;
  const text = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);
  const server = text(data['server_label']) ?? text(data['serverLabel']);
  const tool = text(data['name']) ?? (raw['name'] !== 'mcp_approval_request' ? text(raw['name']) : undefined);
  if (!server || !tool) return null;
  const given = data['arguments'] ?? raw['arguments'];
  const args = typeof given === 'string' ? parseArguments(given) : given && typeof given === 'object' ? given : {};
  const name = `mcp__${server}__${tool}`;
  return sanitizeTool(name) === name ? { tool: name, detail: sortedJson(args) } : { tool: 'mcp', detail: `${server}__${tool} ${sortedJson(args)}` };
}

function parseArguments(raw: string | undefined): Record<string, unknown> {
  if (!raw) return {};
  try {
    const v = JSON.parse(raw);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : { arguments: v };
  } catch {
    return { arguments: raw };
  }
}

export class AgentsGate {
  readonly keeper: Gatekeeper;

  constructor(gate: Client | Gatekeeper, options: GatekeeperOptions = {}) {
    this.keeper = gate instanceof Gatekeeper ? gate : new Gatekeeper(gate, options);
  }

  /** The `needsApproval` function of the SDK tool called `name`. */
  needsApproval(name: string): (runContext: unknown, input: unknown, callId?: string) => Promise<boolean> {
    return async (_ctx, input) => {
      const args = typeof input === 'string' ? parseArguments(input) : ((input ?? {}) as Record<string, unknown>);
      // Fail closed: an unanswered check interrupts; resolve() asks again
      // and rejects if the gate still cannot answer.
      return this.keeper.needsApproval(() => this.keeper.call(name, args));
    };
  }

  /**
   * The gate's verdict on each interruption, in order. An item whose call
   * cannot be read (no arguments and no call to describe) is rejected
   * without asking: nobody could judge it.
   */
  async verdicts(items: ApprovalItem[], signal?: AbortSignal): Promise<Verdict[]> {
    const unreadable: Verdict = { approved: false, message: 'actiongate: what this call would do cannot be read; not run' };
    const asked = items.map((item): ToolCall | Verdict => {
      const agent = item.agent?.name;
      const mcp = hostedMcp(item);
      if (mcp === null) return unreadable;
      if (mcp) return { ...mcp, reason: `${agent ? `agent ${agent} calls` : 'calls'} the hosted MCP tool ${mcp.tool}` };
      const args = described(item);
      if (args === undefined) return unreadable;
      const name = item.name ?? 'tool';
      try {
        return this.keeper.call(name, args, agent ? `agent ${agent} calls ${name}` : `calls ${name}`);
      } catch (e) {
        return failed(e);
      }
    });
    const calls = asked.filter((a): a is ToolCall => !('approved' in a));
    const decided = (await this.keeper.decideAll(calls, signal)).values();
    return asked.map((a) => ('approved' in a ? a : (decided.next().value ?? unreadable)));
  }

  /**
   * Decides a run result's interruptions through the gate and returns its
   * state, every interruption approved or rejected, ready for
   * `runner.run(agent, state)`.
   */
  async resolve<S extends ApprovalState>(result: { interruptions?: ApprovalItem[]; state: S }, signal?: AbortSignal): Promise<S> {
    const items = result.interruptions ?? [];
    const verdicts = await this.verdicts(items, signal);
    items.forEach((item, i) => {
      const v = verdicts[i];
      if (v?.approved) result.state.approve(item);
      else result.state.reject(item, { message: v?.message ?? 'Not approved.' });
    });
    return result.state;
  }

  /**
   * `runner.run(agent, input)` that resolves interruptions through the gate
   * until the run finishes (at most `maxRounds` resumptions).
   */
  async run<R extends InterruptedResult>(
    runner: { run(agent: any, input: any, options?: any): Promise<R> },
    agent: unknown,
    input: unknown,
    options: { maxRounds?: number; signal?: AbortSignal; runOptions?: Record<string, unknown> } = {},
  ): Promise<R> {
    let result = await runner.run(agent, input, options.runOptions);
    for (let round = 0; round < (options.maxRounds ?? 20); round++) {
      if (!result.interruptions?.length) return result;
      const state = await this.resolve(result, options.signal);
      result = await runner.run(agent, state, options.runOptions);
    }
    if (result.interruptions?.length) throw new Error(`still interrupted after ${options.maxRounds ?? 20} rounds`);
    return result;
  }
}
