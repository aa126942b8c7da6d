import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
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
import { PASSWORD, chat, configFor, createTestEnv, quiet, type TestEnv } from "./helpers/app.js";
import { offeredTools } from "./helpers/tools.js";

/* People who are not the owner, through the real Telegram webhook and Bot API (faked on the wire). */

const OWNER = 1001;
const FRIEND = 2002;
const COUSIN = 4004;
const NEWCOMER = 5005;

const MEMORY = "The owner's bank PIN is 4321";
const SCRATCHPAD_TITLE = "Surprise party for Friend";
const OWNER_WORDS = "my code word is tango";

let fake: FakeLlmServer;
let telegram: FakeTelegram;
let env: TestEnv;
let app: RunningApp;
/** The main agent's system prompt at the owner's first turn, before any subagent existed. */
let mainPrompt: string;
let helperId: number;
let filerId: number;
let friendId: number;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  telegram = await startFakeTelegram();
  const port = await freePort();
  const channels =
    `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
    `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`;
  const config = configFor(fake, "anthropic", channels).replace(
    /^\[queue\]/m,
    `publicHostname = "http://127.0.0.1:${port}"\n[queue]`,
  );
  env = await createTestEnv(config);
  env.env.PORT = String(port);
  app = await startApp({ env: env.env, logger: silentLogger });
  const saved = await fetch(`http://127.0.0.1:${app.port}/api/settings/allowlist`, {
    method: "PUT",
    headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
    body: JSON.stringify({ signal: [], telegram: [FRIEND, COUSIN, NEWCOMER], whatsapp: [], email: [] }),
  });
  expect(saved.status).toBe(200);
  await app.db.query("INSERT INTO memories (content) VALUES ($1)", [MEMORY]);
  await app.db.query("INSERT INTO scratchpad (title, body) VALUES ($1, 'cake')", [SCRATCHPAD_TITLE]);
});

afterAll(async () => {
  await app?.close();
  await telegram?.close();
  await fake?.close();
  await env?.cleanup();
});

/** Messages the fake Bot API received for one chat since `from`, as a client shows them. */
function shown(chatId: number, from = 0): string[] {
  return telegram.sent
    .slice(from)
    .filter((sent) => String(sent.params.chat_id) === String(chatId))
    .map((sent) => parseTelegramHtml(String(sent.params.text ?? "")));
}

beforeEach(() => quiet(app));

async function deliver(chatId: number, text: string): Promise<void> {
  const answer = await telegram.deliverUpdate(telegram.textUpdate(chatId, text));
  expect(answer).toEqual({ status: 200, body: { ok: true } });
  await quiet(app);
}

const systemOf = (request: RecordedRequest | undefined): string => JSON.stringify(request?.body.system);
const toolsOf = (request: RecordedRequest | undefined): string[] => offeredTools(request?.body).sort();

describe("the owner sets up a subagent for a person", () => {
  it("talks to the main agent, which creates agents and interlocutors with the reference's tools", async () => {
    const calls = fake.requests.length;
    fake.enqueue(textTurn("Noted."));
    expect((await chat(app, OWNER_WORDS)).body.response).toBe("Noted.");
    mainPrompt = systemOf(fake.requests[calls]);
    expect(mainPrompt).toContain(MEMORY);
    expect(mainPrompt).toContain(SCRATCHPAD_TITLE);
    expect(toolsOf(fake.requests[calls])).toEqual(
      expect.arrayContaining(["execute_sql", "manage_agents", "manage_interlocutors", "send_agent_message"]),
    );

    fake.enqueue(
      toolTurn("manage_agents", {
        action: "create",
        name: "friend helper",
        system_prompt: "You keep Friend company. Speak English.",
        allowed_tools: ["send_telegram_message", "db_search"],
      }),
      toolTurn("manage_agents", {
        action: "create",
        name: "filer",
        system_prompt: "You read files for Cousin.",
        allowed_tools: ["manage_files.read", "send_telegram_message"],
      }),
      toolTurn("manage_agents", {
        action: "create",
        name: "bad",
        system_prompt: "",
        allowed_tools: ["execute_sql"],
      }),
      toolTurn("manage_interlocutors", {
        action: "create",
        display_name: "Friend",
        agent_id: 2,
        service: "telegram",
        identifier: String(FRIEND),
      }),
      toolTurn("manage_interlocutors", {
        action: "create",
        display_name: "Cousin",
        agent_id: 3,
        service: "telegram",
        identifier: String(COUSIN),
      }),
      toolTurn("manage_interlocutors", { action: "create", display_name: "Nobody" }),
      toolTurn("manage_interlocutors", { action: "update", id: 1, enabled: false }),
      textTurn("Set up."),
    );
    const from = fake.requests.length;
    expect((await chat(app, "set up helpers for Friend and Cousin")).body.response).toBe("Set up.");
    const results = fake.requests.slice(from + 1).map((request) => request.lastUserText);
    expect(results[0]).toContain("Agent 2 created.");
    expect(results[1]).toContain("Agent 3 created.");
    expect(results[2]).toContain("invalid allowed_tools entries: execute_sql");
    expect(results[3]).toMatch(
      /display_name: Friend[\s\S]*identities\[1\]\{service,identifier\}:\s+telegram,"2002"/,
    );
    expect(results[5]).toContain("cannot create an enabled interlocutor without an agent_id");
    expect(results[6]).toContain("Cannot modify the owner interlocutor");
    helperId = 2;
    filerId = 3;
    const friend = await app.db.query<{ id: number }>(
      "SELECT id FROM interlocutors WHERE display_name = 'Friend'",
    );
    friendId = friend.rows[0]!.id;
    const agents = await app.db.query("SELECT id FROM agents WHERE name = 'bad'");
    expect(agents.rows).toHaveLength(0);
  });
});

describe("a contact with a subagent", () => {
  it("gets answers in their own conversation, which holds nothing of the owner's", async () => {
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    fake.enqueue(
      toolTurn("send_telegram_message", { recipient: "Friend", message: "Hello Friend!" }),
      textTurn("Greeted."),
    );
    await deliver(FRIEND, "hi, what do you know about Ada?");
    const request = fake.requests[calls];
    expect(request?.lastUserText).toContain("Source: telegram");
    expect(request?.lastUserText).toContain("Sender: Friend");
    const system = systemOf(request);
    expect(system).toContain("You keep Friend company.");
    expect(system).toContain("subagent");
    for (const secret of [MEMORY, SCRATCHPAD_TITLE, OWNER_WORDS]) {
      expect(JSON.stringify(request?.body)).not.toContain(secret);
    }
    // Only what its whitelist names, and send_agent_message: the rest is not even offered.
    expect(toolsOf(request)).toEqual(["db_search", "send_agent_message", "send_telegram_message"]);
    expect(shown(FRIEND, from)).toEqual(["Hello Friend!"]);
    // Its messages are its agent's conversation, not the owner's.
    const rows = await app.db.query<{ agent_id: number }>(
      "SELECT DISTINCT agent_id FROM messages WHERE search_text LIKE '%what do you know about Ada%'",
    );
    expect(rows.rows).toEqual([{ agent_id: helperId }]);

    // Its own conversation continues; db_search finds its own words, not the owner's.
    fake.enqueue(
      toolTurn("db_search", { query: "tango" }),
      toolTurn("db_search", { query: "Ada" }),
      textTurn("ok"),
    );
    const next = fake.requests.length;
    await deliver(FRIEND, "and now?");
    expect(JSON.stringify(fake.requests[next]?.body.messages)).toContain("hi, what do you know about Ada?");
    expect(fake.requests[next + 1]?.lastUserText).toContain('No results found for "tango"');
    expect(fake.requests[next + 2]?.lastUserText).toContain("what do you know about Ada");
    expect(fake.requests[next + 2]?.lastUserText).not.toContain("Table:");
  });

  it("takes a contact's photo to their own agent too (fetching it keeps where the message goes)", async () => {
    const photo = Buffer.from("friend's holiday photo");
    telegram.addFile("friend-photo", photo, "photos/file_9.jpg");
    const calls = fake.requests.length;
    fake.enqueue(textTurn("Lovely."));
    const answer = await telegram.deliverUpdate(telegram.photoUpdate(FRIEND, ["friend-photo"], "look"));
    expect(answer.status).toBe(200);
    await quiet(app);
    const request = fake.requests[calls];
    expect(systemOf(request)).toContain("You keep Friend company.");
    expect(JSON.stringify(request?.body.messages)).toContain(photo.toString("base64"));
    const kept = await app.db.query<{ agent: string }>(
      "SELECT payload->>'agentId' AS agent FROM inbox WHERE payload->>'message' LIKE 'look%'",
    );
    expect(kept.rows).toEqual([{ agent: String(helperId) }]);
    const rows = await app.db.query<{ agent_id: number }>(
      "SELECT DISTINCT agent_id FROM messages WHERE search_text LIKE '%Text: look%'",
    );
    expect(rows.rows).toEqual([{ agent_id: helperId }]);
  });

  it("leaves the owner's turns as they were: the same system prompt, none of the contact's messages", async () => {
    const calls = fake.requests.length;
    fake.enqueue(textTurn("Here."));
    await chat(app, "anything new?");
    expect(systemOf(fake.requests[calls])).toBe(mainPrompt);
    expect(JSON.stringify(fake.requests[calls]?.body.messages)).not.toContain("what do you know about Ada");
  });

  it("refuses actions outside a tool.action whitelist, and people not assigned to it", async () => {
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    fake.enqueue(
      toolTurn("manage_files", { action: "write", filename: "planted.txt", content: "x" }),
      toolTurn("manage_files", { action: "read", filename: "missing.txt" }),
      toolTurn("send_telegram_message", { recipient: "Friend", message: "psst" }),
      toolTurn("send_telegram_message", { recipient: "Ada", message: "psst" }),
      toolTurn("send_telegram_message", { recipient: String(OWNER), message: "psst" }),
      toolTurn("send_telegram_message", { recipient: "Cousin", message: "Only read, sorry." }),
      textTurn("done"),
    );
    await deliver(COUSIN, "write a file for me");
    const request = fake.requests[calls];
    const files = (request?.body.tools as { name: string; description: string }[]).find(
      (tool) => tool.name === "manage_files",
    );
    expect(files?.description).toContain("(Restricted to actions: read.)");
    expect(toolsOf(request)).toEqual(["manage_files", "send_agent_message", "send_telegram_message"]);
    const results = fake.requests.slice(calls + 1).map((r) => r.lastUserText);
    expect(results[0]).toContain("action 'write' of manage_files is not allowed");
    expect(existsSync(join(env.dir, "files", "workspace", "planted.txt"))).toBe(false);
    expect(results[1]).not.toContain("not allowed");
    expect(results[2]).toContain('"Friend" is not assigned to you');
    expect(results[3]).toContain("not assigned to you");
    expect(results[4]).toContain("not assigned to you");
    expect(results[5]).toContain("Message sent to Cousin on Telegram.");
    expect(shown(FRIEND, from)).toEqual([]);
    expect(shown(OWNER, from)).toEqual([]);
    expect(shown(COUSIN, from)).toEqual(["Only read, sorry."]);
    const rows = await app.db.query<{ agent_id: number }>(
      "SELECT DISTINCT agent_id FROM messages WHERE search_text LIKE '%write a file for me%'",
    );
    expect(rows.rows).toEqual([{ agent_id: filerId }]);
  });
});

describe("agents writing to each other", () => {
  it("send_agent_message goes through the queue both ways, with the sender recorded", async () => {
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    fake.enqueue(
      // The owner's turn: the main agent briefs the helper.
      toolTurn("send_agent_message", {
        agent_id: helperId,
        message: "Ask Friend whether dinner at 8 works.",
      }),
      textTurn("Asked the helper."),
      // The helper's turn: it asks Friend and reports back.
      toolTurn("send_telegram_message", { recipient: "Friend", message: "Does dinner at 8 work?" }),
      toolTurn("send_agent_message", { agent_id: 1, message: "I asked Friend about dinner." }),
      textTurn("Waiting for Friend."),
      // The main agent's turn for the helper's message: it answers the owner.
      textTurn("Your helper asked Friend about dinner."),
    );
    expect((await chat(app, "ask Friend about dinner")).body.response).toBe("Asked the helper.");
    await quiet(app);
    expect(fake.requests.length).toBe(calls + 6);
    expect(fake.requests[calls + 1]?.lastUserText).toContain(`Message sent to agent ${helperId}.`);
    const toHelper = fake.requests[calls + 2];
    expect(toHelper?.lastUserText).toContain("Source: agent");
    expect(toHelper?.lastUserText).toContain("Sender: main (ID: 1)");
    expect(toHelper?.lastUserText).toContain("Ask Friend whether dinner at 8 works.");
    expect(systemOf(toHelper)).toContain("You keep Friend company.");
    const toMain = fake.requests[calls + 5];
    expect(toMain?.lastUserText).toContain(`Sender: friend helper (ID: ${helperId})`);
    expect(toMain?.lastUserText).toContain("not from the owner");
    expect(systemOf(toMain)).toBe(mainPrompt);
    const rows = await app.db.query<{ sender: string; agent: string | null }>(
      "SELECT sender, payload->>'agentId' AS agent FROM inbox WHERE source = 'agent' ORDER BY id",
    );
    expect(rows.rows).toEqual([
      { sender: "1", agent: String(helperId) },
      { sender: String(helperId), agent: "1" },
    ]);
    expect(shown(FRIEND, from)).toEqual(["Does dinner at 8 work?"]);
    // The main agent's answer to its helper reaches the owner; the helper's own text reaches nobody.
    expect(shown(OWNER, from)).toEqual(["Your helper asked Friend about dinner."]);
  });
});

describe("a disabled interlocutor", () => {
  it("is refused both ways, and the owner is not bothered about it", async () => {
    fake.enqueue(
      toolTurn("manage_interlocutors", { action: "update", id: friendId, enabled: false }),
      textTurn("Off."),
    );
    await chat(app, "stop talking to Friend");
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    await deliver(FRIEND, "are you there?");
    expect(fake.requests.length).toBe(calls);
    const kept = await app.db.query("SELECT 1 FROM inbox WHERE payload->>'message' = 'are you there?'");
    expect(kept.rows).toHaveLength(0);
    fake.enqueue(
      toolTurn("send_telegram_message", { recipient: "Friend", message: "hi" }),
      toolTurn("send_telegram_message", { recipient: String(FRIEND), message: "hi" }),
      textTurn("Could not."),
    );
    await chat(app, "say hi to Friend");
    expect(fake.requests[calls + 1]?.lastUserText).toContain('Interlocutor "Friend" is disabled.');
    expect(fake.requests[calls + 2]?.lastUserText).toContain('Interlocutor "Friend" is disabled.');
    await quiet(app);
    expect(shown(FRIEND, from)).toEqual([]);
    expect(shown(OWNER, from)).toEqual([]);
    fake.enqueue(
      toolTurn("manage_interlocutors", { action: "update", id: friendId, enabled: true }),
      textTurn("On."),
    );
    await chat(app, "talk to Friend again");
  });
});

describe("an allowlisted person with no agent", () => {
  it("reaches no agent; the owner is told once a day who wrote, what, and how to assign them", async () => {
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    await deliver(NEWCOMER, "hello, can you help me with my taxes?");
    await deliver(NEWCOMER, "hello again");
    expect(fake.requests.length).toBe(calls);
    const kept = await app.db.query("SELECT 1 FROM inbox WHERE sender = $1", [String(NEWCOMER)]);
    expect(kept.rows).toHaveLength(0);
    const told = shown(OWNER, from);
    expect(told).toHaveLength(1);
    expect(told[0]).toContain(`Telegram ${NEWCOMER}`);
    expect(told[0]).toContain("can you help me with my taxes?");
    expect(told[0]).toContain("manage_interlocutors create");
    expect(told[0]).toContain("People page");
    expect(telegram.sent.slice(from).every((sent) => String(sent.params.chat_id) === String(OWNER))).toBe(
      true,
    );
  });
});

describe("the People page's API (owner only)", () => {
  const call = async (path: string, body?: unknown, password: string | null = PASSWORD) => {
    const response = await fetch(`http://127.0.0.1:${app.port}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: {
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        ...(password ? { Authorization: basicAuthHeader(password) } : {}),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it("is refused without the owner's password", async () => {
    expect((await call("/api/people", undefined, null)).status).toBe(401);
    expect(
      (await call("/api/people/agents", { action: "create", name: "x", system_prompt: "" }, "wrong")).status,
    ).toBe(401);
    const page = await fetch(`http://127.0.0.1:${app.port}/people`);
    expect(page.status).toBe(401);
  });

  it("lists people and agents, and changes them with the tools' checks and words", async () => {
    const listed = await call("/api/people");
    expect(listed.status).toBe(200);
    const interlocutors = listed.body.interlocutors as { display_name: string; owner: boolean }[];
    expect(interlocutors.find((person) => person.owner)?.display_name).toBe("Ada");
    expect((listed.body.agents as { name: string }[]).map((agent) => agent.name)).toContain("friend helper");

    const created = await call("/api/people/agents", {
      action: "create",
      name: "newcomer helper",
      system_prompt: "Help the newcomer with forms.",
      allowed_tools: ["send_telegram_message", "manage_uploads.read"],
    });
    expect(created.status).toBe(200);
    expect(created.body.message).toMatch(/^Agent \d+ created\.$/);
    const id = Number(/Agent (\d+)/.exec(String(created.body.message))?.[1]);

    const refused = await call("/api/people/agents", { action: "update", id: 1, name: "mine now" });
    expect(refused).toEqual({
      status: 400,
      body: expect.objectContaining({ error: expect.stringContaining("main agent") }),
    });
    const unsafe = await call("/api/people/agents", { action: "update", id, allowed_tools: ["execute_sql"] });
    expect(unsafe.status).toBe(400);
    expect((await call("/api/people/agents", { action: "drop", id })).status).toBe(400);

    const person = await call("/api/people/interlocutors", {
      action: "create",
      display_name: "Newcomer",
      agent_id: id,
      service: "telegram",
      identifier: String(NEWCOMER),
    });
    expect(person.status).toBe(200);
    expect(
      (person.body.interlocutors as { display_name: string; identities: unknown[] }[]).find(
        (row) => row.display_name === "Newcomer",
      )?.identities,
    ).toEqual([{ service: "telegram", identifier: String(NEWCOMER) }]);
    // Identifiers are checked per channel as the allowlist checks them: markup is no chat id.
    const markup = await call("/api/people/interlocutors", {
      action: "add_identity",
      id: (person.body.interlocutors as { id: number; display_name: string }[]).find(
        (row) => row.display_name === "Newcomer",
      )?.id,
      service: "telegram",
      identifier: "<img src=x onerror=alert(1)>",
    });
    expect(markup.status).toBe(400);
    expect(markup.body.error).toBe(
      'Error: Invalid telegram identifier "<img src=x onerror=alert(1)>": a Telegram chat id is a number, such as 123456789.',
    );
    const toMain = await call("/api/people/interlocutors", {
      action: "create",
      display_name: "Sneaky",
      agent_id: 1,
    });
    expect(toMain.status).toBe(400);
    expect(toMain.body.error).toContain("the main agent, the owner's");
    const owner = (person.body.interlocutors as { id: number; owner: boolean }[]).find((row) => row.owner);
    expect((await call("/api/people/interlocutors", { action: "delete", id: owner?.id })).status).toBe(400);

    // Assigned from the page: the newcomer now reaches their agent.
    const calls = fake.requests.length;
    fake.enqueue(textTurn("Welcome."));
    await deliver(NEWCOMER, "hello once more");
    expect(JSON.stringify(fake.requests[calls]?.body.system)).toContain("Help the newcomer with forms.");
    const conversation = await call(`/api/people/agents/${id}/messages?limit=10`);
    expect(conversation.status).toBe(200);
    const texts = (conversation.body.messages as { role: string; text: string }[]).map(
      (m) => `${m.role}: ${m.text}`,
    );
    expect(texts.join("\n")).toContain("hello once more");
    expect(texts.join("\n")).toContain("assistant: Welcome.");
    expect((await call("/api/people/agents/999/messages")).status).toBe(404);
    expect((await call(`/api/people/agents/${id}/messages?limit=0`)).status).toBe(400);
  });
});
