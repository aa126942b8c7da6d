import type { PluginDetail, Permissions } from "@stavrobot/common";
import type { Plugin } from "./formats/format.js";
import type { ConfigValues } from "./plugin-config.js";
import { configStatus } from "./plugin-config.js";

export const MAX_INSTRUCTIONS_CHARS = 5_000;

export function truncateInstructions(text: string | undefined): string | undefined {
  if (text === undefined || text.trim().length === 0) return undefined;
  if (text.length <= MAX_INSTRUCTIONS_CHARS) return text;
  return text.slice(0, MAX_INSTRUCTIONS_CHARS) + "\n[Instructions truncated]";
}

/**
 * What `GET /bundles/:name` shows: every tool without its entrypoint, config presence without
 * values, and the permissions (the app hides what they forbid from the model).
 */
export function pluginDetail(plugin: Plugin, values: ConfigValues, permissions: Permissions): PluginDetail {
  const instructions = truncateInstructions(plugin.instructions);
  const config = configStatus(plugin, values);
  return {
    name: plugin.name,
    description: plugin.description,
    editable: plugin.editable,
    permissions,
    format: plugin.format,
    tools: plugin.tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      async: tool.async,
      parameters: tool.parameters,
      ...(tool.schema ? { schema: tool.schema } : {}),
      ...(tool.policy ? { policy: tool.policy } : {}),
      ...(tool.unavailable ? { unavailable: tool.unavailable } : {}),
      ...(tool.readOnlyHint ? { readOnlyHint: true } : {}),
    })),
    ...(instructions !== undefined ? { instructions } : {}),
    ...(config !== undefined ? { config } : {}),
    ...(plugin.runSeconds !== undefined ? { runSeconds: plugin.runSeconds } : {}),
  };
}
