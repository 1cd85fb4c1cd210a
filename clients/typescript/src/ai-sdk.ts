/**
 * Gate the tools of a Vercel AI SDK (`ai` 7) call through actiongate, with
 * the SDK's own approval mechanism: `toolApproval` of `generateText`,
 * `streamText` and `ToolLoopAgent`.
 *
 * ```ts
 * import { generateText } from 'ai';
 * import { Client } from 'actiongate';
 * import { toolApproval } from 'actiongate/ai-sdk';
 *
 * const result = await generateText({ model, tools, prompt,
 *   toolApproval: toolApproval(new Client(), { wait: 300 }) });
 * ```
 *
 * Each tool call is asked of the gate: allowed calls run (`approved`); an
 * asked call waits for an operator, bounded by `wait`; a denial, a wait that
 * ran out or an unreachable gate is `denied` with the reason, which the SDK
 * gives the model as the tool's denied output.
 */
import type { GenericToolApprovalFunction, ToolApprovalStatus, ToolSet } from 'ai';
import type { Client } from './client.js';
import { Gatekeeper } from './adapters.js';
import type { GatekeeperOptions } from './adapters.js';

export type { GatekeeperOptions } from './adapters.js';

/** The `toolApproval` function of an AI SDK call, deciding through the gate. */
export function toolApproval<TOOLS extends ToolSet = ToolSet>(
  gate: Client | Gatekeeper,
  options: GatekeeperOptions = {},
): GenericToolApprovalFunction<TOOLS, any, any> {
  const keeper = gate instanceof Gatekeeper ? gate : new Gatekeeper(gate, options);
  return async ({ toolCall }): Promise<ToolApprovalStatus> => {
    const input = (toolCall.input ?? {}) as Record<string, unknown>;
    const verdict = await keeper.decide(() => keeper.call(toolCall.toolName, typeof input === 'object' ? input : { input }));
    return verdict.approved ? { type: 'approved' } : { type: 'denied', reason: verdict.message };
  };
}

/**
 * A tool's own `needsApproval` for UIs that show the SDK's approval parts:
 * true unless the gate's policy allows the call outright, in which case it
 * is recorded as an action first (taking a counted grant's use or a plan
 * step). An asked call, or a gate that cannot answer, needs approval: it
 * fails closed to the app's human. A policy denial is final and throws
 * (`Denied`, with the reason): the app's approval prompt must not be able
 * to run what the policy denies. So does an input no detail can show.
 */
export function needsApproval(gate: Client | Gatekeeper, name: string, options: GatekeeperOptions = {}) {
  const keeper = gate instanceof Gatekeeper ? gate : new Gatekeeper(gate, options);
  return async (input: unknown): Promise<boolean> => {
    const call = keeper.call(name, (input ?? {}) as Record<string, unknown>);
    return keeper.needsApproval(call, undefined, { denialThrows: true });
  };
}
