import { createLogger, errorMessage, listPluginsResponseSchema } from "@stavrobot/common";
import type { Logger, ServiceClient } from "@stavrobot/common";
import { visiblePlugins } from "./visible.js";

const MAX_DESCRIPTION_CHARS = 200;
/** Every turn carries this list: a huge plugin directory must not crowd the prompt. */
const MAX_PLUGINS_LISTED = 50;
let lastWarning = 0;

/** The first line of the plugin block (a system prompt that lists plugins contains it). */
export const PLUGIN_LIST_HEADING = "Available plugins:";

/**
 * The plugin block of the system prompt: "Available plugins:\n- name: description", or "" when
 * there are none, or undefined when the runner could not be asked (logged; never throws).
 * Descriptions are plugin-authored, so they are flattened to one short line each.
 */
export async function describePluginsForPrompt(
  pluginRunner: ServiceClient,
  logger: Logger = createLogger("plugins"),
): Promise<string | undefined> {
  try {
    const { data } = await pluginRunner.request("GET", "/bundles", {
      schema: listPluginsResponseSchema,
      retries: 0,
      timeoutMs: 5_000,
    });
    const plugins = visiblePlugins(data.plugins);
    if (plugins.length === 0) return "";
    const shown = plugins.slice(0, MAX_PLUGINS_LISTED);
    const lines = shown.map(
      (plugin) => `- ${plugin.name}: ${oneLine(plugin.description)}${skillsNote(plugin.skills)}`,
    );
    if (plugins.length > shown.length) {
      lines.push(`- …and ${plugins.length - shown.length} more (manage_plugins list shows them all)`);
    }
    return `${PLUGIN_LIST_HEADING}\n${lines.join("\n")}`;
  } catch (error) {
    // Asked again every turn while the runner is away: say so once a minute, not every turn.
    if (Date.now() - lastWarning > 60_000) {
      lastWarning = Date.now();
      logger.warn("could not list plugins for the prompt", { error: errorMessage(error) });
    }
    return undefined;
  }
}

/** A plugin's skills, named for the model to read on demand (manage_plugins read). */
function skillsNote(skills: readonly { name: string }[] | undefined): string {
  if (!skills || skills.length === 0) return "";
  const names = skills.slice(0, 10).map((skill) => oneLine(skill.name));
  return ` [skills: ${names.join(", ")}${skills.length > 10 ? ", …" : ""}; read one with manage_plugins read]`;
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > MAX_DESCRIPTION_CHARS ? flat.slice(0, MAX_DESCRIPTION_CHARS - 1) + "…" : flat;
}
