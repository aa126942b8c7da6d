import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import { ToolError, textResult } from "./result.js";

/**
 * Built-in tools most conversations never call, with a few words each for `load_tools`'s
 * description. With `toolsOnDemand`, their definitions are sent only once a conversation loaded
 * them (`agent/request-shape.ts`); the tools themselves, their names and parameters are unchanged.
 */
export const ON_DEMAND_TOOLS: Readonly<Record<string, string>> = {
  manage_pages: "web pages you publish",
  manage_files: "workspace files",
  manage_uploads: "files people sent",
  run_python: "Python",
  manage_interlocutors: "people",
  manage_agents: "subagents",
  send_agent_message: "message an agent",
  web_fetch: "read a web page",
  text_to_speech: "speech",
  request_coding_task: "code a plugin",
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
  const list = available.map((name) => `${name} (${ON_DEMAND_TOOLS[name] ?? name})`).join(", ");
  return {
    name: LOAD_TOOLS,
    label: "Load tools",
    description: `Load tools you need before their first use; you can call them from your next step on: ${list}.`,
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
