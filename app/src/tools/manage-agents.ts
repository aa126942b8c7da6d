import type { AgentTool } from "@mariozechner/pi-agent-core";
import { StringEnum, Type } from "@mariozechner/pi-ai";
import { encode } from "@toon-format/toon";
import { SUBAGENT_TOOLS } from "../agent/subagent.js";
import type { Queryable } from "../db/database.js";
import { MAIN_AGENT_ID, createAgent, listAgents, updateAgent } from "../db/people.js";
import { ToolError, textResult, unknownAction } from "./result.js";

const actions = ["help", "create", "update", "list"] as const;

const parameters = Type.Object({
  action: StringEnum(actions),
  id: Type.Optional(Type.Number()),
  name: Type.Optional(Type.String()),
  system_prompt: Type.Optional(Type.String()),
  allowed_tools: Type.Optional(Type.Array(Type.String())),
  allowed_plugins: Type.Optional(Type.Array(Type.String())),
});

const HELP = `manage_agents keeps subagents: agents that talk to other people for you, each with its own conversation, instructions and tools. Agent ${MAIN_AGENT_ID} is you, the main agent, and cannot be changed here.
Actions:
- create {name, system_prompt, allowed_tools?, allowed_plugins?}: a new subagent; answers with its id. system_prompt is added to the base prompt every subagent has: brief it like a colleague (the task, what it may know and share, what it must not do, the language to use). Give it what it needs about the person and the task, and no more: it sees none of your memories or conversations.
- update {id, name?, system_prompt?, allowed_tools?, allowed_plugins?}: change what is given.
- list: every agent.
- help: this text.
allowed_tools is a whitelist (default none) drawn from: ${SUBAGENT_TOOLS.join(", ")}. "tool.action" limits a tool to that action (e.g. "manage_uploads.read"). send_agent_message is always available and run_plugin_tool comes with allowed_plugins: list neither. Give the send tool of the channel its person uses: a subagent can message only the interlocutors assigned to it.
allowed_plugins (default none): "*" for every plugin, "weather" for one plugin, "weather.forecast" for one tool of it. Prefer single tools: a whole plugin includes its destructive tools.
After creating a subagent, assign it to the person (manage_interlocutors, agent_id) and send it its first task with send_agent_message. It asks you (agent ${MAIN_AGENT_ID}) when it lacks something; what it asks for is not the owner speaking.`;

export interface ManageAgentsDeps {
  db: Queryable;
}

/** The reference's `manage_agents`: subagents with their prompt and whitelists. */
export function createManageAgentsTool(deps: ManageAgentsDeps): AgentTool<typeof parameters> {
  const { db } = deps;
  return {
    name: "manage_agents",
    label: "Manage agents",
    description:
      'Manage subagents: agents that carry out a task (usually talking to one person) with their own name, system prompt and allowed tools. Use the "help" action to learn how to use this tool.',
    parameters,
    async execute(_id, params) {
      switch (params.action) {
        case "help":
          return textResult(HELP);
        case "list":
          return textResult(encode(await listAgents(db), { indent: 2, delimiter: "," }));
        case "create": {
          const name = params.name?.trim();
          if (!name) throw new ToolError("Error: name is required for create.");
          if (params.system_prompt === undefined)
            throw new ToolError("Error: system_prompt is required for create.");
          const allowedTools = checkTools(params.allowed_tools ?? []);
          const allowedPlugins = checkPlugins(params.allowed_plugins ?? []);
          const id = await createAgent(db, {
            name,
            systemPrompt: params.system_prompt,
            allowedTools,
            allowedPlugins,
          });
          return textResult(`Agent ${id} created.`, { id });
        }
        case "update": {
          const id = params.id;
          if (id === undefined) throw new ToolError("Error: id is required for update.");
          if (id === MAIN_AGENT_ID)
            throw new ToolError(`Error: Cannot modify agent ${MAIN_AGENT_ID} (the main agent).`);
          const fields = {
            ...(params.name !== undefined ? { name: params.name.trim() } : {}),
            ...(params.system_prompt !== undefined ? { systemPrompt: params.system_prompt } : {}),
            ...(params.allowed_tools !== undefined ? { allowedTools: checkTools(params.allowed_tools) } : {}),
            ...(params.allowed_plugins !== undefined
              ? { allowedPlugins: checkPlugins(params.allowed_plugins) }
              : {}),
          };
          if (Object.keys(fields).length === 0) {
            throw new ToolError(
              "Error: no fields to update. Provide at least one of name, system_prompt, allowed_tools, or allowed_plugins.",
            );
          }
          if (fields.name === "") throw new ToolError("Error: name cannot be empty.");
          if (!(await updateAgent(db, id, fields))) throw new ToolError(`Error: agent ${id} not found.`);
          return textResult(`Agent ${id} updated.`, { id });
        }
        default:
          throw unknownAction(String(params.action), actions);
      }
    },
  };
}

function checkTools(entries: string[]): string[] {
  const invalid = entries.filter((entry) => {
    const [tool, action, extra] = entry.split(".");
    return !SUBAGENT_TOOLS.includes(tool ?? "") || action === "" || extra !== undefined;
  });
  if (invalid.length > 0) {
    throw new ToolError(
      `Error: invalid allowed_tools entries: ${invalid.join(", ")}. Allowed tools: ${SUBAGENT_TOOLS.join(", ")}.`,
    );
  }
  return entries;
}

function checkPlugins(entries: string[]): string[] {
  const invalid = entries.filter(
    (entry) =>
      entry !== "*" &&
      (entry.length === 0 || entry.startsWith(".") || entry.endsWith(".") || entry.includes("..")),
  );
  if (invalid.length > 0) {
    throw new ToolError(
      `Error: invalid allowed_plugins entries: ${invalid.join(", ")}. Each entry must be "*", a plugin name, or "pluginname.toolname".`,
    );
  }
  return entries;
}
