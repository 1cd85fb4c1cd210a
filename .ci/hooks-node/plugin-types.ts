// The plugin actiongate ships must be an opencode `Plugin` whose hooks
// match `@opencode-ai/plugin`'s `Hooks` type (TypeScript infers the
// plugin's type from the JS module itself).
import type { Hooks, Plugin, PluginInput } from "@opencode-ai/plugin";
import { ActiongatePlugin } from "../../crates/cli/src/hooks/opencode-plugin.js";

const plugin: Plugin = ActiongatePlugin;
type Before = NonNullable<Hooks["tool.execute.before"]>;
export async function check(input: PluginInput): Promise<Before | undefined> {
  const hooks: Hooks = await plugin(input);
  return hooks["tool.execute.before"];
}
