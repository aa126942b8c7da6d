import { createLogger, errorMessage, listBundlesResponseSchema } from "@stavrobot/common";
import type { Logger, ServiceClient } from "@stavrobot/common";

const MAX_DESCRIPTION_CHARS = 200;

/**
 * The plugin block of the system prompt: "Available plugins:\n- name: description", or "" when
 * there are none. Never throws: when the runner is down the prompt simply has no plugin list.
 * Descriptions are plugin-authored, so they are flattened to one short line each.
 */
export async function describePluginsForPrompt(
  pluginRunner: ServiceClient,
  logger: Logger = createLogger("plugins"),
): Promise<string> {
  try {
    const { data } = await pluginRunner.request("GET", "/bundles", {
      schema: listBundlesResponseSchema,
      retries: 0,
      timeoutMs: 5_000,
    });
    if (data.plugins.length === 0) return "";
    const lines = data.plugins.map((plugin) => `- ${plugin.name}: ${oneLine(plugin.description)}`);
    return `Available plugins:\n${lines.join("\n")}`;
  } catch (error) {
    logger.warn("could not list plugins for the prompt", { error: errorMessage(error) });
    return "";
  }
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > MAX_DESCRIPTION_CHARS ? flat.slice(0, MAX_DESCRIPTION_CHARS - 1) + "…" : flat;
}
