/**
 * Gate a Mastra (`@mastra/core` 1.x) agent's tools through actiongate, with
 * Mastra's own tool approval: `requireToolApproval` suspends a call, and
 * `approveToolCallGenerate` / `declineToolCallGenerate` resume the run.
 *
 * ```ts
 * import { Client } from 'actiongate';
 * import { MastraGate } from 'actiongate/mastra';
 *
 * const gate = new MastraGate(new Client(), { wait: 300 });
 * const output = await gate.generate(agent, 'clean up the build folder');
 * ```
 *
 * {@link MastraGate.requireToolApproval} asks the gate's policy: a call
 * it allows is recorded as an action (taking a counted grant's use or a
 * plan step) and runs without suspending; everything else suspends. Each
 * suspended call is then recorded as an action and waited for (bounded);
 * approved calls are resumed with `approveToolCallGenerate`, the rest
 * declined with the reason, which Mastra gives the model.
 */
import type { Client } from './client.js';
import { ActionGateError } from './errors.js';
import { Gatekeeper } from './adapters.js';
import type { GatekeeperOptions } from './adapters.js';

export type { GatekeeperOptions } from './adapters.js';

/** What this adapter reads of a `generate` output. */
interface GenerateOutput {
  finishReason?: string;
  runId?: string;
  suspendPayload?: unknown;
}

/** What this adapter uses of a Mastra `Agent`. */
interface MastraAgent<O extends GenerateOutput> {
  listTools(options?: any): Promise<Record<string, unknown>> | Record<string, unknown>;
  generate(messages: any, options?: any): Promise<O>;
  approveToolCallGenerate(options: { runId: string; toolCallId?: string } & Record<string, unknown>): Promise<O>;
  declineToolCallGenerate(options: { runId: string; toolCallId?: string; reason?: string } & Record<string, unknown>): Promise<O>;
}

/**
 * The suspended call of a `generate` output, wherever this version puts it;
 * `undefined` when it names no tool: nobody could judge such a call.
 */
function suspendedCall(output: GenerateOutput): { toolCallId?: string; toolName: string; args: Record<string, unknown> } | undefined {
  const p = (output.suspendPayload ?? {}) as Record<string, any>;
  const inner = (p['requireToolApproval'] ?? p) as Record<string, any>;
  if (typeof inner['toolName'] !== 'string' || !inner['toolName']) return undefined;
  const args = inner['args'];
  return {
    toolCallId: typeof inner['toolCallId'] === 'string' ? inner['toolCallId'] : undefined,
    toolName: inner['toolName'],
    args: args && typeof args === 'object' && !Array.isArray(args) ? args : { args },
  };
}

/**
 * How a tool says itself whether its calls need approval: `own`, a
 * function (Mastra's `requireApproval`, the AI SDK's `needsApproval`, an
 * MCP client's per-tool `needsApprovalFn`), which Mastra lets decide over
 * `requireToolApproval`, so the gate would not be asked; `always`, `true`
 * (every call suspends whatever the gate says).
 */
function ownApproval(tool: unknown): 'own' | 'always' | undefined {
  if (!tool || typeof tool !== 'object') return undefined;
  const t = tool as Record<string, unknown>;
  if ([t['requireApproval'], t['needsApproval'], t['needsApprovalFn']].some((f) => typeof f === 'function')) return 'own';
  return t['requireApproval'] === true || t['needsApproval'] === true ? 'always' : undefined;
}

export class MastraGate {
  readonly keeper: Gatekeeper;
  /** Tools whose every call suspends (their own `requireApproval: true`): asked once, when suspended. */
  private readonly suspending = new Set<string>();

  constructor(gate: Client | Gatekeeper, options: GatekeeperOptions = {}) {
    this.keeper = gate instanceof Gatekeeper ? gate : new Gatekeeper(gate, options);
  }

  /**
   * The `requireToolApproval` function of `agent.generate`/`stream`. Mastra
   * lets a tool's own approval function decide over it: use
   * {@link MastraGate.generate}, which refuses such an agent, or check the
   * agent with {@link MastraGate.checkTools} first.
   */
  get requireToolApproval(): (ctx: { toolName: string; args: Record<string, unknown> }) => Promise<boolean> {
    return async ({ toolName, args }) => {
      // A tool that suspends every call is asked when suspended, once: an
      // allowed call recorded here would be a second action.
      if (this.suspending.has(toolName)) return true;
      // Fail closed: an unanswered check suspends, then decide (and refuse) below.
      return this.keeper.needsApproval(() => this.keeper.call(toolName, args ?? {}));
    };
  }

  /**
   * Checks the agent's tools (and those `generateOptions` adds: `toolsets`,
   * `clientTools`) before a run: throws when one decides its own approval
   * with a function, which Mastra lets override `requireToolApproval`, so
   * its calls would run without the gate (an MCP client's
   * `requireToolApproval` function does this to each of its tools too).
   * Remove the function and let the gate's policy decide, or make it
   * `true`.
   */
  async checkTools(agent: Pick<MastraAgent<GenerateOutput>, 'listTools'>, generateOptions: Record<string, unknown> = {}): Promise<void> {
    if (typeof agent.listTools !== 'function') throw new ActionGateError('this Mastra agent cannot list its tools (listTools): the gate cannot tell whether one decides its own approval');
    // The tools as Mastra resolves them for this run: tools chosen by the
    // run's request context are only known with it.
    const context = generateOptions['requestContext'] ?? generateOptions['runtimeContext'];
    const tools: [string, unknown][] = Object.entries((await agent.listTools(context === undefined ? undefined : { requestContext: context, runtimeContext: context })) ?? {});
    const sets = generateOptions['toolsets'];
    if (sets && typeof sets === 'object') for (const set of Object.values(sets)) if (set && typeof set === 'object') tools.push(...Object.entries(set));
    const client = generateOptions['clientTools'];
    if (client && typeof client === 'object') tools.push(...Object.entries(client));
    for (const [name, tool] of tools) {
      const own = ownApproval(tool);
      if (own === 'own') {
        throw new ActionGateError(`the Mastra tool ${name} decides its own approval with a function, which Mastra lets override requireToolApproval: its calls would not be asked to actiongate (remove the function, or make it true)`);
      }
      const id = (tool as Record<string, unknown>)['id'];
      if (own === 'always') for (const n of [name, id]) if (typeof n === 'string') this.suspending.add(n);
    }
  }

  /**
   * `agent.generate(messages)` with every tool call gated: resumes each
   * suspension with the gate's answer until the run finishes (at most
   * `maxRounds` suspensions). An agent with a tool that decides its own
   * approval is refused before it runs ({@link MastraGate.checkTools}).
   */
  async generate<O extends GenerateOutput>(
    agent: MastraAgent<O>,
    messages: unknown,
    options: { maxRounds?: number; signal?: AbortSignal; generateOptions?: Record<string, unknown> } = {},
  ): Promise<O> {
    const extra = options.generateOptions ?? {};
    await this.checkTools(agent, extra);
    let output = await agent.generate(messages, { ...extra, requireToolApproval: this.requireToolApproval });
    for (let round = 0; round < (options.maxRounds ?? 20); round++) {
      if (output.finishReason !== 'suspended' || !output.runId) return output;
      const call = suspendedCall(output);
      const verdict = call
        ? await this.keeper.decide(() => this.keeper.call(call.toolName, call.args, `Mastra agent calls ${call.toolName}`), options.signal)
        : { approved: false, message: 'actiongate: the suspended call names no tool; not run' };
      const resume = { ...extra, runId: output.runId, ...(call?.toolCallId ? { toolCallId: call.toolCallId } : {}) };
      output = verdict.approved
        ? await agent.approveToolCallGenerate(resume)
        : await agent.declineToolCallGenerate({ ...resume, reason: verdict.message });
    }
    if (output.finishReason === 'suspended') throw new Error(`still suspended after ${options.maxRounds ?? 20} rounds`);
    return output;
  }
}
