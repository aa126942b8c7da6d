import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import { ToolError, textResult } from "./result.js";

/**
 * Built-in tools most conversations never call, with a few words each for `load_tools`'s
 * description (none where the name says it). With `toolsOnDemand`, their definitions are sent only once a conversation loaded
 * them (`agent/request-shape.ts`); the tools themselves, their names and parameters are unchanged.
 */
export const ON_DEMAND_TOOLS: Readonly<Record<string, string>> = {
  manage_pages: "web pages you publish",
  manage_files: "workspace files",
  manage_uploads: "files people sent",
  run_python: "",
  manage_interlocutors: "people",
  manage_agents: "subagents",
  send_agent_message: "",
  web_fetch: "read a web page",
  text_to_speech: "speech",
  request_coding_task: "code a plugin",
};

/**
 * The plugin tools: on demand like the others while the conversation's system prompt lists no
 * plugin (a new install has none, and most conversations never add one); sent with every request
 * once it lists one (`agent/request-shape.ts`).
 */
export const PLUGIN_TOOLS: Readonly<Record<string, string>> = {
  manage_plugins: "install or list plugins",
  run_plugin_tool: "",
};

/**
 * The skills tool: on demand while the system prompt lists no approved skill (installing one is
 * rare); sent with every request once it lists one, so reading it costs no extra step.
 */
export const SKILL_TOOLS: Readonly<Record<string, string>> = {
  manage_skills: "install or read skills",
};

/** What `load_tools` can load: the on-demand tools, then the plugin and skill tools. */
export const LOADABLE_TOOLS: Readonly<Record<string, string>> = {
  ...ON_DEMAND_TOOLS,
  ...PLUGIN_TOOLS,
  ...SKILL_TOOLS,
};

export const LOAD_TOOLS = "load_tools";

const parameters = Type.Object({
  names: Type.Array(Type.String(), { description: "Tool names from the list above." }),
});

/**
 * `load_tools`: makes some of `available` (the on-demand tools this configuration has) part of
 * the conversation's requests from the model's next step on. Loading is read back from the
 * conversation itself (this call stays in it), so nothing is stored here.
 */
export function createLoadToolsTool(available: readonly string[]): AgentTool<typeof parameters> {
  // A name that says what it is goes alone.
  const list = available
    .map((name) => (LOADABLE_TOOLS[name] ? `${name} (${LOADABLE_TOOLS[name]})` : name))
    .join(", ");
  return {
    name: LOAD_TOOLS,
    label: "Load tools",
    description: `Load tools before their first use (callable from your next step): ${list}.`,
    parameters,
    async execute(_id, params) {
      const unknown = params.names.filter((name) => !available.includes(name));
      if (unknown.length > 0)
        throw new ToolError(
          `No tool to load named ${unknown.join(", ")}. Tools to load: ${available.join(", ")}.`,
        );
      if (params.names.length === 0) throw new ToolError(`Name at least one tool: ${available.join(", ")}.`);
      return textResult(`Loaded ${params.names.join(", ")}: call them directly from now on.`);
    },
  };
}
