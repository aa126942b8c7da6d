import { Type } from "@mariozechner/pi-ai";
import { describe, expect, it } from "vitest";
import type { AgentRecord } from "../db/people.js";
import { textResult, type AnyAgentTool } from "../tools/result.js";
import { buildSubagentPrompt, pluginAllowed, toolsForAgent } from "./subagent.js";

function tool(name: string): AnyAgentTool {
  return {
    name,
    label: name,
    description: `The ${name} tool.`,
    parameters: Type.Object({}),
    execute: async (_id, params) => textResult(`${name} ran with ${JSON.stringify(params)}`),
  };
}

const ALL = [
  "execute_sql",
  "manage_knowledge",
  "manage_files",
  "manage_uploads",
  "run_plugin_tool",
  "send_telegram_message",
  "send_agent_message",
  "db_search",
].map(tool);

function agent(fields: Partial<AgentRecord>): AgentRecord {
  return {
    id: 2,
    name: "helper",
    system_prompt: "",
    allowed_tools: [],
    allowed_plugins: [],
    created_at: new Date(),
    ...fields,
  };
}

const names = (tools: AnyAgentTool[]) => tools.map((t) => t.name);
const text = (result: { content: { type: string; text?: string }[] }) => result.content[0]?.text;

describe("a subagent's tools", () => {
  it("are send_agent_message and what its whitelist names from the safe set, nothing else", () => {
    expect(names(toolsForAgent(ALL, agent({})))).toEqual(["send_agent_message"]);
    // execute_sql and manage_knowledge are not in the safe set: even a row naming them gives nothing.
    const offered = toolsForAgent(
      ALL,
      agent({ allowed_tools: ["execute_sql", "manage_knowledge", "db_search"] }),
    );
    expect(names(offered)).toEqual(["send_agent_message", "db_search"]);
    expect(names(toolsForAgent(ALL, agent({ id: 1 })))).toEqual(names(ALL));
  });

  it("limits a tool.action entry to its actions, saying so in the description", async () => {
    const [files] = toolsForAgent(
      ALL,
      agent({ allowed_tools: ["manage_files.read", "manage_files.list"] }),
    ).filter((t) => t.name === "manage_files");
    expect(files?.description).toBe("The manage_files tool. (Restricted to actions: read, list.)");
    expect(text(await files!.execute("1", { action: "read" }))).toContain("manage_files ran");
    await expect(files!.execute("2", { action: "delete" })).rejects.toThrow(
      "action 'delete' of manage_files is not allowed for this agent. Allowed actions: read, list.",
    );
    await expect(files!.execute("3", {})).rejects.toThrow("not allowed");
    // A bare entry beside it wins: every action.
    const [whole] = toolsForAgent(
      ALL,
      agent({ allowed_tools: ["manage_files.read", "manage_files"] }),
    ).filter((t) => t.name === "manage_files");
    expect(text(await whole!.execute("4", { action: "delete" }))).toContain("manage_files ran");
  });

  it("gets run_plugin_tool only with plugins, and only for those plugins and tools", async () => {
    expect(names(toolsForAgent(ALL, agent({ allowed_plugins: [] })))).not.toContain("run_plugin_tool");
    const [run] = toolsForAgent(ALL, agent({ allowed_plugins: ["weather.forecast", "notes"] })).filter(
      (t) => t.name === "run_plugin_tool",
    );
    expect(
      text(await run!.execute("1", { plugin: "weather", tool: "forecast", parameters: "{}" })),
    ).toContain("ran");
    expect(
      text(await run!.execute("2", { plugin: "notes", tool: "delete_all", parameters: "{}" })),
    ).toContain("ran");
    await expect(run!.execute("3", { plugin: "weather", tool: "alerts", parameters: "{}" })).rejects.toThrow(
      "plugin tool weather.alerts is not allowed",
    );
    await expect(run!.execute("4", { plugin: "bank", tool: "pay", parameters: "{}" })).rejects.toThrow(
      "not allowed",
    );
    expect(pluginAllowed(["*"], "anything", "any")).toBe(true);
    expect(pluginAllowed(["weather.forecast"], "weather")).toBe(true);
    expect(pluginAllowed(["weather.forecast"], "weatherman", "forecast")).toBe(false);
  });
});

describe("a subagent's prompt", () => {
  const plugins = "Available plugins:\n- weather: Forecasts.\n- bank: Payments.\n- notes: Notes.";

  it("is the base, the hostname and time zone, its plugins and its own instructions", () => {
    const prompt = buildSubagentPrompt({
      agent: { system_prompt: "Book the dentist.", allowed_plugins: ["weather.forecast", "notes"] },
      publicHostname: "https://bot.example",
      timezone: "Europe/Athens",
      plugins,
    });
    expect(prompt).toContain("subagent");
    expect(prompt).toContain("agent 1");
    expect(prompt).toContain("https://bot.example");
    expect(prompt).toContain("Europe/Athens");
    expect(prompt).toContain("- weather: Forecasts.\n  Tools: forecast\n- notes: Notes.");
    expect(prompt).not.toContain("bank");
    expect(prompt.endsWith("Book the dentist.")).toBe(true);
  });

  it("lists no plugins without allowed_plugins", () => {
    const prompt = buildSubagentPrompt({
      agent: { system_prompt: "", allowed_plugins: [] },
      publicHostname: "h",
      timezone: "UTC",
      plugins,
    });
    expect(prompt).not.toContain("Available plugins");
  });
});
