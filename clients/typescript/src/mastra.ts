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

export class MastraGate {
  readonly keeper: Gatekeeper;

  constructor(gate: Client | Gatekeeper, options: GatekeeperOptions = {}) {
    this.keeper = gate instanceof Gatekeeper ? gate : new Gatekeeper(gate, options);
  }

  /** The `requireToolApproval` function of `agent.generate`/`stream`. */
  get requireToolApproval(): (ctx: { toolName: string; args: Record<string, unknown> }) => Promise<boolean> {
    return async ({ toolName, args }) => {
      // Fail closed: an unanswered check suspends, then decide (and refuse) below.
      return this.keeper.needsApproval(() => this.keeper.call(toolName, args ?? {}));
    };
  }

  /**
   * `agent.generate(messages)` with every tool call gated: resumes each
   * suspension with the gate's answer until the run finishes (at most
   * `maxRounds` suspensions).
   */
  async generate<O extends GenerateOutput>(
    agent: MastraAgent<O>,
    messages: unknown,
    options: { maxRounds?: number; signal?: AbortSignal; generateOptions?: Record<string, unknown> } = {},
  ): Promise<O> {
    const extra = options.generateOptions ?? {};
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
