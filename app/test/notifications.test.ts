import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import type { RunningApp } from "../src/app.js";
import {
  INTERNAL_SECRET,
  PASSWORD,
  chat,
  configFor,
  createTestEnv,
  post,
  startTestApp,
  type TestEnv,
  handOver,
} from "./helpers/app.js";
import { openEventStream } from "./helpers/event-stream.js";
import { raw } from "./helpers/http.js";

/**
 * The owner's notifications (`GET /api/notifications`, `POST /api/notifications/dismiss`) and the
 * web chat's history (`GET /api/chat/history`), against the real app on a real database: a
 * reminder the model sets with `manage_cron` is listed in the owner's words until dismissed, over
 * a restart too; the history is the owner's own conversation, never another person's or a
 * subagent's.
 */
let fake: FakeLlmServer;
let env: TestEnv;
let app: RunningApp;

interface Listed {
  id: number;
  source: string | null;
  title: string;
  response: string;
  failed: boolean;
  at: string;
}

async function listed(): Promise<Listed[]> {
  const response = await raw(app.port, "GET", "/api/notifications");
  expect(response.status).toBe(200);
  return response.json.notifications as Listed[];
}

async function remind(note: string, text: string): Promise<void> {
  fake.setResponder(undefined);
  fake.enqueue(
    toolTurn("manage_cron", { action: "create", note, fire_at: new Date(Date.now() + 1_000).toISOString() }),
    textTurn("Scheduled."),
    textTurn(text),
  );
  expect((await chat(app, `please remind me to ${note}`)).body.response).toContain("Scheduled.");
}

beforeAll(async () => {
  fake = await startFakeAnthropic();
  env = await createTestEnv(configFor(fake));
  app = await startTestApp(env);
});

afterAll(async () => {
  await app?.close();
  await fake?.close();
  await env?.cleanup();
});

describe("notifications", () => {
  it("are the owner's alone", async () => {
    for (const [method, path] of [
      ["GET", "/api/notifications"],
      ["POST", "/api/notifications/dismiss"],
      ["GET", "/api/chat/history"],
    ] as const) {
      const body = method === "POST" ? JSON.stringify({ ids: [1] }) : undefined;
      const headers = { "Content-Type": "application/json" };
      expect((await raw(app.port, method, path, { auth: null, headers, body })).status).toBe(401);
      expect(
        (await raw(app.port, method, path, { auth: basicAuthHeader("wrong"), headers, body })).status,
      ).toBe(401);
      // The internal listener (sibling services) has no such route, even with its secret.
      const internal = await raw(app.internalPort, method, path, {
        auth: `Bearer ${INTERNAL_SECRET}`,
        headers,
        body,
      });
      expect(internal.status).toBe(404);
    }
  });

  it("list a reminder in the owner's words until dismissed, over a restart, and tell open pages", async () => {
    expect(await listed()).toEqual([]);
    await remind("water the plants", "Time to **water** the plants!");
    const [kept] = await vi.waitFor(
      async () => {
        const now = await listed();
        expect(now).toHaveLength(1);
        return now;
      },
      { timeout: 15_000 },
    );
    expect(kept).toMatchObject({
      source: expect.stringMatching(/^cron:\d+$/),
      title: "water the plants",
      response: "Time to **water** the plants!",
      failed: false,
    });
    expect(Date.parse(kept?.at ?? "")).toBeGreaterThan(Date.now() - 60_000);
    // Shown by a console (the CLI): still listed, since only the owner dismisses it.
    await post(app.port, "/api/answers/seen", { ids: [kept?.id] });
    expect((await raw(app.port, "GET", "/api/answers/pending")).json.answers).toEqual([]);
    expect(await listed()).toHaveLength(1);

    // A restart keeps it.
    await app.close();
    app = await startTestApp(env);
    expect((await listed()).map((item) => item.id)).toEqual([kept?.id]);

    const stream = await openEventStream(`http://127.0.0.1:${app.port}/api/events`, {
      Authorization: basicAuthHeader(PASSWORD),
    });
    await stream.first("ready");
    const dismissed = await post(app.port, "/api/notifications/dismiss", { ids: [kept?.id, 999_999] });
    expect(dismissed).toMatchObject({ status: 200, body: { dismissed: [kept?.id] } });
    expect(await listed()).toEqual([]);
    // Every open page hears of it.
    expect((await stream.first("dismissed")).data).toEqual({ ids: [kept?.id] });
    stream.close();
    // Dismissing again changes nothing, and says so.
    expect((await post(app.port, "/api/notifications/dismiss", { ids: [kept?.id] })).body).toEqual({
      dismissed: [],
    });
  });

  it("name a plugin's result by its tool, not by the text the model reads", async () => {
    fake.setResponder(undefined);
    fake.enqueue(textTurn("The radar shows rain at 5."));
    const accepted = await handOver(app, {
      source: "plugin:weather",
      pluginResult: { plugin: "weather", tool: "radar", outcome: { success: true, output: "rain" } },
    });
    expect(accepted.status).toBe(202);
    const [kept] = await vi.waitFor(
      async () => {
        const now = await listed();
        expect(now).toHaveLength(1);
        return now;
      },
      { timeout: 15_000 },
    );
    expect(kept).toMatchObject({
      source: "plugin:weather",
      title: "radar finished",
      response: "The radar shows rain at 5.",
    });
    await post(app.port, "/api/notifications/dismiss", { ids: [kept?.id] });
  });

  it("are listed for an answer whose turn finished just before a crash", async () => {
    // Finished and saved, but the process died before the answer was kept for the owner.
    const saved = await app.db.query<{ id: number }>(
      `INSERT INTO inbox (source, payload, status, response, outcome, finished_at)
       VALUES ('cron:9', $1, 'done', 'Stretch your legs now.', 'reply', now()) RETURNING id`,
      [
        JSON.stringify({
          message: "[Cron entry 9 has fired] stretch your legs\n\nThis is a scheduled reminder.",
          attachments: [],
          title: "stretch your legs",
        }),
      ],
    );
    expect(await listed()).toEqual([]);
    await app.close();
    app = await startTestApp(env);
    await vi.waitFor(async () =>
      expect(await listed()).toMatchObject([
        {
          id: saved.rows[0]?.id,
          source: expect.stringMatching(/^cron:\d+$/),
          title: "stretch your legs",
          response: "Stretch your legs now.",
        },
      ]),
    );
    await post(app.port, "/api/notifications/dismiss", { ids: [saved.rows[0]?.id] });
  });

  it("refuse bad input with a clear error and lose nothing", async () => {
    await remind("call the bank", "Call the bank before noon.");
    await vi.waitFor(async () => expect(await listed()).toHaveLength(1), { timeout: 15_000 });
    const bad: [string, string][] = [
      ["not json", "The ids, please"],
      ["no ids", JSON.stringify({})],
      ["ids not a list", JSON.stringify({ ids: "1" })],
      ["a zero id", JSON.stringify({ ids: [0] })],
      ["a fraction", JSON.stringify({ ids: [1.5] })],
      ["a text id", JSON.stringify({ ids: ["1"] })],
      ["too many", JSON.stringify({ ids: Array.from({ length: 101 }, (_, index) => index + 1) })],
      ["an unknown field", JSON.stringify({ ids: [1], all: true })],
      ["a too large id", JSON.stringify({ ids: [2 ** 31] })],
    ];
    for (const [what, body] of bad) {
      const response = await raw(app.port, "POST", "/api/notifications/dismiss", {
        headers: { "Content-Type": "application/json" },
        body,
      });
      expect(response.status, what).toBe(400);
      expect(typeof response.json.error, what).toBe("string");
    }
    expect(await listed()).toHaveLength(1);
    for (const limit of ["0", "101", "abc", "-1", "1.5", ""]) {
      const response = await raw(app.port, "GET", `/api/chat/history?limit=${limit}`);
      expect(response.status, limit).toBe(400);
      expect(response.json.error).toBe("'limit' must be an integer from 1 to 100");
    }
  });
});

describe("the web chat's history", () => {
  it("is the owner's own conversation, oldest first, with reminders in the owner's words", async () => {
    fake.setResponder(undefined);
    fake.enqueue(textTurn("Hello from the assistant."));
    await post(app.port, "/chat", { message: "hello from the web", source: "web" });
    // Another person's message (their subagent's conversation), and a notice that answers nothing.
    await app.db.query(
      `INSERT INTO inbox (source, sender, payload, status, response, outcome, finished_at)
       VALUES ('telegram', '555', '{"message": "a stranger writes", "attachments": [], "agentId": 2}',
               'done', 'the subagent answers', 'reply', now()),
              ('cli', NULL, '{"message": "to a subagent", "attachments": [], "agentId": 3}',
               'done', 'subagent reply', 'reply', now()),
              ('delivery', NULL, '{"message": "(a telegram message)", "attachments": []}',
               'done', 'given up', 'notice', now())`,
    );
    const response = await raw(app.port, "GET", "/api/chat/history");
    expect(response.status).toBe(200);
    const entries = response.json.entries as {
      id: number;
      from: string;
      source: string | null;
      text: string;
      response: string | null;
      failed: boolean;
      attachments: number;
    }[];
    const ids = entries.map((entry) => entry.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    const texts = entries.map((entry) => entry.text);
    expect(texts).not.toContain("a stranger writes");
    expect(texts).not.toContain("to a subagent");
    expect(texts).not.toContain("(a telegram message)");
    expect(JSON.stringify(entries)).not.toContain("has fired]");
    expect(entries.find((entry) => entry.text === "water the plants")).toMatchObject({
      from: "background",
      source: expect.stringMatching(/^cron:\d+$/),
      response: "Time to **water** the plants!",
    });
    expect(entries.find((entry) => entry.text === "radar finished")).toMatchObject({
      from: "background",
      source: "plugin:weather",
    });
    expect(entries.at(-1)).toMatchObject({
      from: "owner",
      source: "web",
      text: "hello from the web",
      response: "Hello from the assistant.",
      failed: false,
      attachments: 0,
    });
    const two = await raw(app.port, "GET", "/api/chat/history?limit=2");
    expect(two.json.entries.map((entry: { id: number }) => entry.id)).toEqual(ids.slice(-2));
  });
});
