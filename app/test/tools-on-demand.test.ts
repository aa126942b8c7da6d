import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import type { RunningApp } from "../src/app.js";
import { chat, configFor, createTestEnv, startTestApp, type TestEnv } from "./helpers/app.js";

/**
 * Rarely used tools described only once a conversation loads them, and long results of earlier
 * turns sent short: through POST /chat with the fake model, on the real database.
 */
let fake: FakeLlmServer;
const envs: TestEnv[] = [];
const apps: RunningApp[] = [];

async function start(topLevel = ""): Promise<RunningApp> {
  const env = await createTestEnv(configFor(fake).replace("[queue]", `${topLevel}\n[queue]`));
  envs.push(env);
  const app = await startTestApp(env);
  apps.push(app);
  return app;
}

const toolNames = (index: number): string[] =>
  ((fake.requests[index]?.body.tools ?? []) as { name: string }[]).map((tool) => tool.name);

/** Each tool_result content of a request, in order. */
function results(index: number): string[] {
  const messages = (fake.requests[index]?.body.messages ?? []) as { content: unknown }[];
  return messages.flatMap((message) =>
    Array.isArray(message.content)
      ? (message.content as { type: string; content?: unknown }[])
          .filter((block) => block.type === "tool_result")
          .map((block) => JSON.stringify(block.content))
      : [],
  );
}

/** 40 rows of 32 hexadecimal characters: some 1,500 characters of result. */
const LONG_QUERY = "SELECT g, md5(g::text) AS h FROM generate_series(1, 40) g";

beforeAll(async () => {
  fake = await startFakeAnthropic();
});

afterAll(async () => {
  for (const app of apps) await app.close();
  await fake?.close();
  for (const env of envs) await env.cleanup();
});

describe("tools on demand (the default)", () => {
  let app: RunningApp;
  beforeAll(async () => {
    app = await start();
  }, 60_000);

  it("describes a rarely used tool only after load_tools, and keeps it for the conversation", async () => {
    fake.enqueue(textTurn("hello"));
    const first = fake.requests.length;
    await chat(app, "hi");
    const names = toolNames(first);
    expect(names).toContain("execute_sql");
    expect(names).toContain("load_tools");
    expect(names).not.toContain("manage_pages");
    const loader = (fake.requests[first]?.body.tools as { name: string; description: string }[]).find(
      (tool) => tool.name === "load_tools",
    );
    expect(loader?.description).toContain("manage_pages (web pages you publish)");
    expect(loader?.description).toContain("run_plugin_tool, run_python, manage_interlocutors (people)");

    fake.enqueue(toolTurn("load_tools", { names: ["manage_pages"] }), textTurn("ready"));
    const load = fake.requests.length;
    expect((await chat(app, "publish a page")).body.response).toBe("ready");
    expect(toolNames(load)).not.toContain("manage_pages");
    expect(fake.requests[load + 1]?.lastUserText).toContain("Loaded manage_pages");
    expect(toolNames(load + 1)).toContain("manage_pages");

    fake.enqueue(textTurn("still here"));
    const later = fake.requests.length;
    await chat(app, "and now?");
    expect(toolNames(later)).toContain("manage_pages");
    // The order of the full list, so a loaded tool does not move the others.
    expect(toolNames(later).indexOf("manage_pages")).toBeLessThan(toolNames(later).indexOf("load_tools"));
  });

  it("answers an unknown or empty name with the tools that can be loaded", async () => {
    fake.enqueue(toolTurn("load_tools", { names: ["manage_everything"] }), textTurn("ok"));
    const at = fake.requests.length;
    await chat(app, "load something odd");
    const answer = fake.requests[at + 1]?.lastUserText ?? "";
    expect(answer).toContain("No tool to load named manage_everything");
    expect(answer).toContain("run_python");

    fake.enqueue(toolTurn("load_tools", { names: [] }), textTurn("ok"));
    const empty = fake.requests.length;
    await chat(app, "load nothing");
    expect(fake.requests[empty + 1]?.lastUserText).toContain("Name at least one tool");

    // A lone name where a list belongs: the arguments' check makes it a list, and it is loaded.
    fake.enqueue(toolTurn("load_tools", { names: "run_python" }), textTurn("ok"));
    const lone = fake.requests.length;
    await chat(app, "load with a string");
    expect(fake.requests[lone + 1]?.lastUserText).toContain("Loaded run_python");
    expect(toolNames(lone + 1)).toContain("run_python");

    fake.enqueue(toolTurn("load_tools", { names: { run_python: true } }), textTurn("ok"));
    const wrong = fake.requests.length;
    await chat(app, "load with an object");
    expect(fake.requests[wrong + 1]?.lastUserText).toMatch(/names/);
    expect(fake.requests[wrong + 1]?.lastUserText).not.toContain("Loaded");
  });

  it("runs a tool called without loading it, and describes it from then on", async () => {
    fake.enqueue(
      toolTurn("manage_files", { action: "write", filename: "note.txt", content: "kept" }),
      textTurn("written"),
    );
    const at = fake.requests.length;
    expect((await chat(app, "write a note")).body.response).toBe("written");
    expect(toolNames(at)).not.toContain("manage_files");
    expect(fake.requests[at + 1]?.lastUserText).not.toMatch(/not found/i);
    expect(toolNames(at + 1)).toContain("manage_files");
  });

  it("sends a long result whole in its turn and short in later ones; the database keeps it whole", async () => {
    fake.enqueue(toolTurn("execute_sql", { query: LONG_QUERY }), textTurn("Here they are."));
    const at = fake.requests.length;
    await chat(app, "show me the codes");
    const whole = results(at + 1).at(-1) ?? "";
    expect(whole.length).toBeGreaterThan(1400);
    expect(whole).toContain("c4ca4238a0b923820dcc509a6f75849b");

    fake.enqueue(textTurn("Sure."));
    const next = fake.requests.length;
    await chat(app, "thanks");
    const short = results(next).at(-1) ?? "";
    expect(short.length).toBeLessThan(500);
    expect(short).toMatch(/more characters left out: call the tool again to see them/);
    // Its start is kept, cut at a line's end.
    expect(short).toContain("rows[40]{g,h}:");
    // The same shortened text in every later request (the prompt cache's prefix stays the same).
    fake.enqueue(textTurn("Again."));
    const after = fake.requests.length;
    await chat(app, "once more");
    expect(results(after).at(-1)).toBe(short);

    const stored = await app.db.query<{ text: string }>(
      `SELECT content->'content'->0->>'text' AS text FROM messages WHERE role = 'toolResult'
        ORDER BY id DESC LIMIT 1`,
    );
    expect(stored.rows[0]?.text.length).toBeGreaterThan(1400);
  });
});

describe("every tool in every request, every result whole", () => {
  it("is what toolsOnDemand = false and earlierResultChars = 0 send", async () => {
    const app = await start("toolsOnDemand = false\nearlierResultChars = 0");
    fake.enqueue(toolTurn("execute_sql", { query: LONG_QUERY }), textTurn("Here."));
    await chat(app, "codes");
    fake.enqueue(textTurn("ok"));
    const next = fake.requests.length;
    await chat(app, "thanks");
    const names = toolNames(next);
    expect(names).toEqual(expect.arrayContaining(["manage_pages", "manage_files", "run_python"]));
    expect(names).not.toContain("load_tools");
    expect((results(next).at(-1) ?? "").length).toBeGreaterThan(1400);
  });

  it("refuses a value of the wrong type with the key's name", async () => {
    const env = await createTestEnv(
      configFor(fake).replace("[queue]", `earlierResultChars = "many"\n[queue]`),
    );
    envs.push(env);
    await expect(startTestApp(env)).rejects.toThrow(/earlierResultChars/);
  });
});
