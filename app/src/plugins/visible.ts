import { isToolPermitted } from "@stavrobot/common";
import type { PluginDetail, PluginSummary } from "@stavrobot/common";

/**
 * What the model may see of the plugins: the owner's permissions decide. A disabled plugin
 * (`[]`), like an MCP server config.toml says is not `enabled`, does not exist for the model, and
 * a forbidden tool is not listed. The runner reports everything (the owner's settings need it);
 * every model-facing path filters through here.
 */
export function visiblePlugins<T extends PluginSummary>(plugins: readonly T[]): T[] {
  return plugins.filter((plugin) => !hidden(plugin));
}

/** The detail with forbidden tools removed, or undefined when the plugin is disabled. */
export function visibleDetail(detail: PluginDetail): PluginDetail | undefined {
  if (hidden(detail)) return undefined;
  return { ...detail, tools: detail.tools.filter((tool) => isToolPermitted(detail.permissions, tool.name)) };
}

function hidden(plugin: PluginSummary): boolean {
  return plugin.permissions.length === 0 || plugin.server?.state === "disabled";
}
