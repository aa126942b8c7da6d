import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  freePort,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { PASSWORD, chat, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";

const OWNER = 1001;
const FRIEND = 2002;
const SUMMARY = "SUMMARY: Friend told long stories about their garden.";

describe("a subagent's conversation is compacted on its own", () => {
  let fake: FakeLlmServer;
  let telegram: FakeTelegram;
  let env: TestEnv;
  let app: RunningApp;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    telegram = await startFakeTelegram();
    const port = await freePort();
    const config = configFor(
      fake,
      "anthropic",
      `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
        `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
    ).replace(/^\[queue\]/m, `publicHostname = "http://127.0.0.1:${port}"\ncontextTokensK = 10\n[queue]`);
    env = await createTestEnv(config);
    env.env.PORT = String(port);
    app = await startApp({ env: env.env, logger: silentLogger });
    await fetch(`http://127.0.0.1:${app.port}/api/settings/allowlist`, {
      method: "PUT",
      headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
      body: JSON.stringify({ signal: [], telegram: [FRIEND], whatsapp: [], email: [] }),
    });
    await app.db.query(
      `WITH agent AS (
         INSERT INTO agents (name, system_prompt, allowed_tools)
         VALUES ('friend helper', 'Listen to Friend.', '{send_telegram_message}') RETURNING id),
       person AS (
         INSERT INTO interlocutors (display_name, agent_id) SELECT 'Friend', id FROM agent RETURNING id)
       INSERT INTO interlocutor_identities (interlocutor_id, service, identifier) SELECT id, 'telegram', $1 FROM person`,
      [String(FRIEND)],
    );
  });

  afterAll(async () => {
    await app?.close();
    await telegram?.close();
    await fake?.close();
    await env?.cleanup();
  });

  it("keeps the owner's conversation whole while the subagent's is summarised", async () => {
    // Every turn gets a short answer; anything else is a compaction asking for its summary.
    fake.setResponder((request) => {
      const system = JSON.stringify(request.body.system ?? "");
      const isTurn = system.includes("Listen to Friend") || system.includes("personal assistant");
      return textTurn(isTurn ? "Mm-hm." : SUMMARY);
    });
    await chat(app, "a short note from the owner");
    for (let n = 0; n < 12; n++) {
      const story = `Story ${n}: ${"the tomatoes grew tall and the beans climbed the fence. ".repeat(60)}`;
      expect((await telegram.deliverUpdate(telegram.textUpdate(FRIEND, story))).status).toBe(200);
      await vi.waitFor(async () => {
        await app.queue.idle();
        const open = await app.db.query("SELECT 1 FROM inbox WHERE status IN ('pending', 'processing')");
        expect(open.rows).toHaveLength(0);
      });
    }
    const compactions = await app.db.query<{ agent_id: number; summary: string }>(
      "SELECT agent_id, summary FROM compactions ORDER BY id",
    );
    expect(compactions.rows.length).toBeGreaterThan(0);
    expect(compactions.rows.every((row) => row.agent_id === 2)).toBe(true);
    // The subagent's next request starts from its summary; the owner's still has their note.
    const calls = fake.requests.length;
    expect((await telegram.deliverUpdate(telegram.textUpdate(FRIEND, "and one more"))).status).toBe(200);
    await vi.waitFor(() => expect(fake.requests.length).toBeGreaterThan(calls));
    await app.queue.idle();
    const sub = fake.requests[calls];
    expect(JSON.stringify(sub?.body.messages)).toContain("[Summary of earlier conversation]");
    expect(JSON.stringify(sub?.body.messages)).not.toContain("a short note from the owner");
    const before = fake.requests.length;
    await chat(app, "and from me");
    const owner = fake.requests[before];
    expect(JSON.stringify(owner?.body.messages)).toContain("a short note from the owner");
    expect(JSON.stringify(owner?.body.messages)).not.toContain("Summary of earlier conversation");
    expect(JSON.stringify(owner?.body.messages)).not.toContain("tomatoes");
  });
});
