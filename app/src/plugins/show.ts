import type { PluginDetail } from "@stavrobot/common";

const FORMAT_LABELS: Record<string, string> = {
  stavrobot: "Stavrobot",
  cyclopone: "Cyclop One",
  workbench: "Workbench",
  mcp: "MCP server",
  osaurus: "Osaurus",
};

/**
 * What `manage_plugins show` gives the model of a (visible) plugin: its format, each tool's
 * parameters as the plugin declared them (a JSON Schema where the format has one, Stavrobot's flat
 * map otherwise), what it asked for, whether it has network and what still waits for the owner's
 * approval. Never its instructions (framed apart) or the owner's permissions.
 */
export function showForModel(detail: PluginDetail): Record<string, unknown> {
  const {
    instructions: _instructions,
    permissions: _permissions,
    tools,
    format,
    waitingApproval,
    ...rest
  } = detail;
  return {
    ...rest,
    format: FORMAT_LABELS[format ?? "stavrobot"] ?? format,
    ...(waitingApproval && waitingApproval.length > 0 ? { waitingForOwnerApproval: waitingApproval } : {}),
    tools: tools.map(({ schema, parameters, ...tool }) =>
      schema ? { ...tool, input_schema: schema } : { ...tool, parameters },
    ),
  };
}

export function formatLabel(format: string | undefined): string {
  return FORMAT_LABELS[format ?? "stavrobot"] ?? String(format);
}
