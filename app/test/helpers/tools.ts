import { expect } from "vitest";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { LOAD_TOOLS, LOADABLE_TOOLS } from "../../src/tools/load-tools.js";
import { chat, type AppFixture } from "./app.js";

interface ToolDefinition {
  name: string;
  description?: string;
}

/**
 * The tools a model request offers: those it describes, and the on-demand ones its `load_tools`
 * names (their definitions come once the conversation loads them).
 */
export function offeredTools(body: unknown): string[] {
  const tools = ((body as { tools?: ToolDefinition[] } | undefined)?.tools ?? []).filter(
    (tool): tool is ToolDefinition => typeof tool?.name === "string",
  );
  const loader = tools.find((tool) => tool.name === LOAD_TOOLS);
  const listed = new Set(
    loader?.description
      ?.split(":")
      .slice(1)
      .join(":")
      .match(/\b[a-z_]+\b/g) ?? [],
  );
  const loadable = Object.keys(LOADABLE_TOOLS).filter(
    (name) => listed.has(name) && !tools.some((tool) => tool.name === name),
  );
  return [...tools.map((tool) => tool.name), ...loadable];
}

/** Has the model call one tool, then answer; returns what the tool answered (as the model saw it). */
export async function callToolThroughChat(
  t: AppFixture,
  name: string,
  input: Record<string, unknown>,
): Promise<string> {
  t.fake.enqueue(toolTurn(name, input), textTurn("ok"));
  const before = t.fake.requests.length;
  const response = await chat(t.app, `please use ${name}`);
  expect(response.status).toBe(200);
  return t.fake.requests[before + 1]?.lastUserText ?? "";
}
