import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  freePort,
  parseTelegramHtml,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  toolTurn,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
// The real plugin-runner (its buildServer on port 0), reaching the app's internal port, with our
// asking MCP server (the SDK's server side) over stdio.
import {
  SECRET,
  makeTempRoot,
  startPluginHost,
  uniqueName,
  type TestPluginHost,
} from "../../plugin-runner/test/helpers.js";
import { bundleFixtureServer } from "../../plugin-runner/test/mcp/fixtures.js";
import { PASSWORD, chat, configFor, createTestEnv, post, quiet, type TestEnv } from "./helpers/app.js";

/*
 * An MCP server's question mid tool call, through the app: it reaches the owner on their channel
 * (Telegram, faked on the wire) and in the web admin's notifications, the owner's `/answer` (from
 * the web chat, while the turn waits) or `/decline` (on Telegram) goes back to the server, and the
 * model reads the tool's result. A question raised in a contact's turn goes to the owner, never to
 * the contact, whose own `/answer` is an ordinary message to their agent.
 */

const OWNER = 1001;
const FRIEND = 2002;
const server = uniqueName("mcp-asks");

let fake: FakeLlmServer;
let telegram: FakeTelegram;
let pluginHost: TestPluginHost;
let env: TestEnv;
let app: RunningApp;
let root: string;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  telegram = await startFakeTelegram();
  root = makeTempRoot("mcp-questions");
  mkdirSync(join(root, "server"), { mode: 0o755 });
  const script = await bundleFixtureServer(join(root, "server"), "asking");
  const file = join(root, "mcp-servers.json");
  writeFileSync(file, JSON.stringify({ [server]: { command: "node", args: [script], timeoutSeconds: 10 } }));
  const internalPort = await freePort();
  pluginHost = await startPluginHost({
    root: join(root, "host"),
    mcpServersFile: file,
    appUrl: `http://127.0.0.1:${internalPort}`,
  });
  await vi.waitFor(
    async () => {
      const detail = await pluginHost.request("GET", `/bundles/${server}`);
      expect((detail.body as { server: { state: string } }).server.state).toBe("running");
    },
    { timeout: 30_000 },
  );
  const port = await freePort();
  env = await createTestEnv(
    configFor(
      fake,
      "anthropic",
      `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
        `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
    ).replace(/^\[queue\]/m, `publicHostname = "http://127.0.0.1:${port}"\n[queue]`),
  );
  app = await startApp({
    env: {
      ...env.env,
      PORT: String(port),
      INTERNAL_PORT: String(internalPort),
      PLUGIN_RUNNER_URL: pluginHost.url,
      STAVROBOT_INTERNAL_SECRET: SECRET,
    },
    logger: silentLogger,
  });
  const allowed = await fetch(`http://127.0.0.1:${app.port}/api/settings/allowlist`, {
    method: "PUT",
    headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
    body: JSON.stringify({ signal: [], telegram: [FRIEND], whatsapp: [], email: [] }),
  });
  expect(allowed.status).toBe(200);
  const agent = await post(app.port, "/api/people/agents", {
    action: "create",
    name: "booking helper",
    system_prompt: "You book tables for Friend.",
    allowed_tools: ["send_telegram_message"],
    allowed_plugins: [server],
  });
  const helperId = Number(/Agent (\d+)/.exec(String(agent.body.message))?.[1]);
  expect(
    (
      await post(app.port, "/api/people/interlocutors", {
        action: "create",
        display_name: "Friend",
        agent_id: helperId,
        service: "telegram",
        identifier: String(FRIEND),
      })
    ).status,
  ).toBe(200);
}, 120_000);

afterAll(async () => {
  await app?.close();
  await pluginHost?.close();
  await pluginHost?.host.isolation.removeUser(server);
  await telegram?.close();
  await fake?.close();
  await env?.cleanup();
  if (root) rmSync(root, { recursive: true, force: true });
});

function shown(chatId: number, from = 0): string[] {
  return telegram.sent
    .slice(from)
    .filter((sent) => String(sent.params.chat_id) === String(chatId))
    .map((sent) => parseTelegramHtml(String(sent.params.text ?? "")));
}

/** The id of the next question the owner is told on Telegram. */
async function questionOnTelegram(from: number): Promise<string> {
  return vi.waitFor(
    () => {
      const told = shown(OWNER, from).find((text) => text.includes(`MCP server "${server}" asks you`));
      expect(told).toBeDefined();
      expect(told).toContain("How shall I book the table?");
      return /\/answer ([a-z2-9]{4})/.exec(told!)![1]!;
    },
    { timeout: 20_000 },
  );
}

const bookTable = toolTurn("run_plugin_tool", { plugin: server, tool: "book-table", parameters: "{}" });

describe("an MCP server's question", () => {
  it("reaches the owner, whose answer from the web chat goes back while the turn waits", async () => {
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    fake.enqueue(bookTable, textTurn("Booked for two, inside."));
    const turn = chat(app, "book us a table");
    const id = await questionOnTelegram(from);
    // Also in the web admin's notifications.
    const notice = await app.db.query<{ response: string }>(
      "SELECT response FROM inbox WHERE source = 'mcp' AND response LIKE $1",
      [`%/answer ${id}%`],
    );
    expect(notice.rows).toHaveLength(1);
    // A wrong answer is refused at once, naming the problem; the question still waits.
    const wrong = await chat(app, `/answer ${id} guests=two seating=inside`);
    expect(String(wrong.body.response)).toContain('"guests" must be a number');
    const right = await chat(app, `/answer ${id} guests=2 seating=inside note="by the window"`);
    expect(right.body.response).toBe(`Answered: MCP server "${server}" has your answer.`);
    expect((await turn).body.response).toMatch(/Booked for two, inside\.$/);
    const result = fake.requests[calls + 1]?.lastUserText ?? "";
    expect(result).toContain('"action":"accept"');
    expect(result).toContain('"guests":2');
    expect(result).toContain("by the window");
    // Neither answer was a message to the model.
    expect(fake.requests).toHaveLength(calls + 2);
    expect(JSON.stringify(fake.requests.slice(calls).map((request) => request.body.messages))).not.toContain(
      "/answer",
    );
  });

  it("raised in a contact's turn goes to the owner, never to the contact, and only the owner answers it", async () => {
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    fake.enqueue(bookTable, textTurn("I could not book it, Friend."), textTurn("Noted, Friend."));
    await telegram.deliverUpdate(telegram.textUpdate(FRIEND, "book a table for me"));
    const id = await questionOnTelegram(from);
    // The contact answering is an ordinary message to their agent (it waits for the running turn).
    await telegram.deliverUpdate(telegram.textUpdate(FRIEND, `/answer ${id} guests=9 seating=terrace`));
    // The owner declines on their channel, and is told it was sent.
    await telegram.deliverUpdate(telegram.textUpdate(OWNER, `/decline ${id}`));
    await vi.waitFor(() => expect(fake.requests.length).toBeGreaterThanOrEqual(calls + 3), {
      timeout: 30_000,
    });
    await quiet(app);
    expect(fake.requests[calls + 1]?.lastUserText).toContain('{"action":"decline"}');
    expect(fake.requests[calls + 2]?.lastUserText).toContain(`/answer ${id} guests=9 seating=terrace`);
    expect(shown(OWNER, from)).toContain(`Declined: MCP server "${server}" was told.`);
    const friendSaw = shown(FRIEND, from);
    expect(friendSaw.join("\n")).not.toContain("asks you");
    expect(friendSaw).toContain("I could not book it, Friend.");
  });

  it("answers a command for no waiting question, or a wrong one, at once", async () => {
    const calls = fake.requests.length;
    const cases: [string, string][] = [
      ["/answer zzzz guests=2", "No question zzzz waits for an answer"],
      ["/decline", "Usage: /answer <question> key=value"],
      ["/cancel zzzz now", '"/cancel" takes only the question\'s id.'],
      ["/answer zzzz guests", '"guests" is not key=value.'],
      ["/answer zzzz a=1 a=2", '"a" is given twice.'],
      ['/answer zzzz note="open', "A double quote is not closed."],
    ];
    for (const [text, expected] of cases) {
      const answer = await chat(app, text);
      expect(answer.status, text).toBe(200);
      expect(String(answer.body.response), text).toContain(expected);
    }
    expect(fake.requests.length).toBe(calls);
  });
});
