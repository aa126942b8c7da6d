import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
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
  type RecordedRequest,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
// The real plugin-runner (its buildServer on port 0), reaching the app's internal port.
import {
  SECRET,
  startPluginHost,
  uniqueName,
  writePlugin,
  type TestPluginHost,
} from "../../plugin-runner/test/helpers.js";
import {
  PASSWORD,
  chat,
  configFor,
  createTestEnv,
  handOver,
  post,
  quiet,
  type TestEnv,
} from "./helpers/app.js";

/*
 * A plugin run started in a contact's conversation, through the real Telegram webhook (the Bot API
 * faked on the wire) and the real plugin-runner, whose async results come back through its outbox.
 */

const OWNER = 1001;
const FRIEND = 2002;

const plugin = uniqueName("radar");

let fake: FakeLlmServer;
let telegram: FakeTelegram;
let pluginHost: TestPluginHost;
let env: TestEnv;
let app: RunningApp;
let appEnv: NodeJS.ProcessEnv;
let helperId: number;
let files: string;
let own: string;
let mainPrompt: string;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  telegram = await startFakeTelegram();
  const internalPort = await freePort();
  pluginHost = await startPluginHost({
    appUrl: `http://127.0.0.1:${internalPort}`,
    limits: { asyncTimeoutMs: 60_000 },
  });
  writePlugin(
    pluginHost.pluginsDir,
    plugin,
    [
      {
        name: "scan",
        // Files a tool writes to /tmp/<plugin>/ come back with its result.
        script: `#!/bin/sh\ncat >/dev/null\nprintf 'rain map' > /tmp/${plugin}/map.txt\necho '{"radar": "rain at 17:00"}'\n`,
        manifest: { async: true },
      },
      {
        name: "slow",
        // Waits until the test lets it finish (a file in its own directory).
        script: `#!/bin/sh\ncat >/dev/null\nwhile [ ! -e go ]; do sleep 0.05; done\necho '{"slow": "finished"}'\n`,
        manifest: { async: true },
      },
      {
        name: "measure",
        script: `#!/bin/sh\ncat >/dev/null\necho '{"measured": true}'\n`,
        manifest: { parameters: { doc: { type: "file", description: "A document." } } },
      },
    ],
    { description: "Rain radar." },
  );
  // Telegram's webhook reaches the app at its public address.
  const port = await freePort();
  env = await createTestEnv(
    configFor(
      fake,
      "anthropic",
      `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
        `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
    ).replace(/^\[queue\]/m, `publicHostname = "http://127.0.0.1:${port}"\n[queue]`),
  );
  appEnv = {
    ...env.env,
    PORT: String(port),
    INTERNAL_PORT: String(internalPort),
    PLUGIN_RUNNER_URL: pluginHost.url,
    STAVROBOT_INTERNAL_SECRET: SECRET,
  };
  files = join(env.dir, "files");
  mkdirSync(join(files, "uploads"), { recursive: true });
  writeFileSync(join(files, "uploads", "owner-contract.txt"), "the owner's contract");
  app = await startApp({ env: appEnv, logger: silentLogger });
  const allowed = await fetch(`http://127.0.0.1:${app.port}/api/settings/allowlist`, {
    method: "PUT",
    headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
    body: JSON.stringify({ signal: [], telegram: [FRIEND], whatsapp: [], email: [] }),
  });
  expect(allowed.status).toBe(200);
  const agent = await post(app.port, "/api/people/agents", {
    action: "create",
    name: "friend helper",
    system_prompt: "You keep Friend company.",
    allowed_tools: ["send_telegram_message", "manage_files"],
    allowed_plugins: [plugin],
  });
  helperId = Number(/Agent (\d+)/.exec(String(agent.body.message))?.[1]);
  const person = await post(app.port, "/api/people/interlocutors", {
    action: "create",
    display_name: "Friend",
    agent_id: helperId,
    service: "telegram",
    identifier: String(FRIEND),
  });
  expect(person.status).toBe(200);
  own = join(files, "agents", String(helperId));
  const calls = fake.requests.length;
  fake.enqueue(textTurn("Hello."));
  await chat(app, "hello");
  mainPrompt = JSON.stringify(fake.requests[calls]?.body.system);
}, 120_000);

afterAll(async () => {
  await app?.close();
  // Its user is this machine's, not the test's.
  await pluginHost?.host.isolation.removeUser(plugin);
  await pluginHost?.close();
  if (pluginHost) rmSync(pluginHost.root, { recursive: true, force: true });
  await telegram?.close();
  await fake?.close();
  await env?.cleanup();
});

beforeEach(() => quiet(app));

const systemOf = (request: RecordedRequest | undefined): string => JSON.stringify(request?.body.system);

function shown(chatId: number, from = 0): string[] {
  return telegram.sent
    .slice(from)
    .filter((sent) => String(sent.params.chat_id) === String(chatId))
    .map((sent) => parseTelegramHtml(String(sent.params.text ?? "")));
}

async function deliver(text: string): Promise<void> {
  const answer = await telegram.deliverUpdate(telegram.textUpdate(FRIEND, text));
  expect(answer).toEqual({ status: 200, body: { ok: true } });
}

/** Waits for the model to have been asked `count` times in all, then for everything to settle. */
async function asked(count: number): Promise<void> {
  await vi.waitFor(() => expect(fake.requests.length).toBeGreaterThanOrEqual(count), { timeout: 30_000 });
  await quiet(app);
}

describe("a plugin run a contact's agent started", () => {
  it("reports its async result in that agent's conversation and to the contact, never to the owner", async () => {
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    fake.enqueue(
      toolTurn("run_plugin_tool", { plugin, tool: "scan", parameters: "{}" }),
      textTurn("Scanning, Friend."),
      // The result's turn: nothing sent with a tool, so its text goes to its person.
      textTurn("Rain at 17:00, Friend."),
    );
    await deliver("scan the radar please");
    await asked(calls + 3);
    expect(fake.requests[calls + 1]?.lastUserText).toMatch(/asynchronously/);
    const result = fake.requests[calls + 2];
    expect(systemOf(result)).toContain("You keep Friend company.");
    expect(result?.lastUserText).toContain(`Source: plugin:${plugin}/scan`);
    expect(result?.lastUserText).toContain("Sender: a plugin run you started for Friend");
    expect(result?.lastUserText).toContain("rain at 17:00");
    // Its own conversation: the contact's request is there.
    expect(JSON.stringify(result?.body.messages)).toContain("scan the radar please");
    // Its returned file is the subagent's, not the owner's.
    const map = join(own, "plugin_output", plugin, "map.txt");
    expect(result?.lastUserText).toContain(map);
    expect(readFileSync(map, "utf8")).toBe("rain map");
    expect(existsSync(join(files, "plugin_output", plugin))).toBe(false);

    const kept = await app.db.query<{ agent: string; reply: unknown }>(
      "SELECT payload->>'agentId' AS agent, payload->'replyTo' AS reply FROM inbox WHERE source = $1",
      [`plugin:${plugin}/scan`],
    );
    expect(kept.rows).toEqual([
      { agent: String(helperId), reply: { channel: "telegram", recipient: String(FRIEND) } },
    ]);
    const rows = await app.db.query<{ agent_id: number }>(
      "SELECT DISTINCT agent_id FROM messages WHERE search_text LIKE '%rain at 17:00%'",
    );
    expect(rows.rows).toEqual([{ agent_id: helperId }]);
    expect(shown(FRIEND, from)).toEqual(["Scanning, Friend.", "Rain at 17:00, Friend."]);
    expect(shown(OWNER, from)).toEqual([]);

    // Nothing of it waits for the owner either: their next reply is only its own.
    const next = fake.requests.length;
    fake.enqueue(textTurn("Nothing new."));
    expect((await chat(app, "anything new?")).body.response).toBe("Nothing new.");
    expect(JSON.stringify(fake.requests[next]?.body.messages)).not.toContain("rain at 17:00");
  });

  it("hands a plugin only the subagent's own files", async () => {
    const calls = fake.requests.length;
    fake.enqueue(
      toolTurn("manage_files", { action: "write", filename: "plan.txt", content: "floor plan" }),
      toolTurn("run_plugin_tool", {
        plugin,
        tool: "measure",
        parameters: JSON.stringify({ doc: join(files, "uploads", "owner-contract.txt") }),
      }),
      toolTurn("run_plugin_tool", {
        plugin,
        tool: "measure",
        parameters: JSON.stringify({ doc: "workspace/plan.txt" }),
      }),
      textTurn("Measured."),
    );
    await deliver("measure my plan");
    await asked(calls + 4);
    const answers = fake.requests.slice(calls + 2, calls + 4).map((request) => request.lastUserText);
    expect(answers[0]).toContain(`Parameter "doc": the file must be inside ${own}.`);
    expect(answers[1]).toContain("measured");
  });

  it("still reports to the contact's agent when the app restarted while the run went on", async () => {
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    fake.enqueue(
      toolTurn("run_plugin_tool", { plugin, tool: "slow", parameters: "{}" }),
      textTurn("This takes a while, Friend."),
    );
    await deliver("run the slow scan");
    await asked(calls + 2);
    await app.close();
    // The run ends while the app is down: its result waits in the runner's outbox.
    writeFileSync(join(pluginHost.pluginsDir, plugin, "slow", "go"), "");
    await pluginHost.host.background.idle();
    expect(await pluginHost.host.outbox.pending()).toHaveLength(1);

    fake.enqueue(textTurn("The slow scan finished, Friend."));
    app = await startApp({ env: appEnv, logger: silentLogger });
    await asked(calls + 3);
    const result = fake.requests[calls + 2];
    expect(systemOf(result)).toContain("You keep Friend company.");
    expect(result?.lastUserText).toContain(`Source: plugin:${plugin}/slow`);
    expect(result?.lastUserText).toContain("finished");
    await vi.waitFor(() =>
      expect(shown(FRIEND, from)).toEqual(["This takes a while, Friend.", "The slow scan finished, Friend."]),
    );
    expect(shown(OWNER, from)).toEqual([]);
  });
});

describe("a plugin's message that names no turn of a subagent", () => {
  it("goes to the owner's agent as before (an older runner's result, or the owner's own run)", async () => {
    const calls = fake.requests.length;
    fake.enqueue(textTurn("Noted the old result."));
    const response = await handOver(
      app,
      {
        source: `plugin:${plugin}/scan`,
        pluginResult: { plugin, tool: "scan", outcome: { success: true, output: { radar: "dry" } } },
      },
      SECRET,
    );
    expect(response.status).toBe(202);
    await asked(calls + 1);
    expect(systemOf(fake.requests[calls])).toBe(mainPrompt);
    expect(fake.requests[calls]?.lastUserText).toContain("Sender: owner");
  });

  it("refuses a turn on a message that is not a plugin's", async () => {
    const refused = await post(app.port, "/chat", { message: "hi", source: "cli", turn: 1 });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toContain("turn: only a plugin's message");
  });
});
