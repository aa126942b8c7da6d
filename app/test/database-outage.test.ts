import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { silentLogger } from "@stavrobot/common";
import {
  startFakeAnthropic,
  startTcpProxy,
  textTurn,
  toolTurn,
  type FakeLlmServer,
  type TcpProxy,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { NOT_SAVED_REPLY, SAVED_WILL_RUN_REPLY } from "../src/routes/chat.js";
import { chat, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";

/**
 * PostgreSQL going away mid-turn. The server is shared with other tests, so the outage is a TCP
 * proxy in front of it that drops and refuses connections. Only a server can go away: with the
 * embedded database (no TEST_DATABASE_URL) there is nothing to test here.
 */
const serverUrl = process.env.TEST_DATABASE_URL;

describe.runIf(serverUrl)("a database outage", () => {
  let fake: FakeLlmServer;
  let testEnv: TestEnv;
  let proxy: TcpProxy;
  let app: RunningApp;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    testEnv = await createTestEnv(configFor(fake));
    const direct = new URL(testEnv.env.DATABASE_URL as string);
    proxy = await startTcpProxy(Number(direct.port || 5432), direct.hostname);
    const viaProxy = new URL(direct);
    viaProxy.hostname = "127.0.0.1";
    viaProxy.port = String(proxy.port);
    app = await startApp({
      env: { ...testEnv.env, DATABASE_URL: viaProxy.toString() },
      logger: silentLogger,
    });
  });

  afterAll(async () => {
    await proxy?.restore();
    await app?.close();
    await proxy?.close();
    await fake?.close();
    await testEnv?.cleanup();
  });

  const inbox = async () =>
    (
      await app.db.query<{ id: number; status: string; response: string | null; seen: boolean }>(
        "SELECT id, status, response, seen FROM inbox ORDER BY id",
      )
    ).rows;

  it("keeps a message accepted before the outage and runs it once the database is back", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    // The model asks for a tool just as the database goes: the call cannot be recorded, so the tool
    // does not run and the turn starts again from its saved user message.
    fake.enqueue(
      { ...toolTurn("execute_sql", { query: "SELECT 1" }), gate: held },
      textTurn("Answer after outage"),
    );
    const pending = chat(app, "first question");
    await vi.waitFor(() => expect(fake.requests).toHaveLength(1));
    await proxy.cut();
    release();
    const answer = await pending;
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ error: SAVED_WILL_RUN_REPLY, saved: true });

    await proxy.restore();
    await vi.waitFor(
      async () =>
        expect((await inbox())[0]).toMatchObject({ status: "done", response: "Answer after outage" }),
      { timeout: 20_000, interval: 200 },
    );
    // Ran again from its saved user message: the model saw a well-formed history both times.
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1]?.lastUserText).toContain("first question");
    expect((await inbox())[0]?.seen).toBe(false);

    // The sender was told it would run; its answer comes with their next reply.
    fake.enqueue(textTurn("second answer"));
    const next = await chat(app, "second question");
    expect(next.status).toBe(200);
    expect(next.body.response).toContain("Answer after outage");
    expect(next.body.response).toContain("second answer");
    const messages = await app.db.query<{ role: string }>("SELECT role FROM messages ORDER BY id");
    expect(messages.rows.map((row) => row.role)).toEqual(["user", "assistant", "user", "assistant"]);
  });

  it("keeps a final answer that arrives during an outage and records it when the database is back", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    fake.enqueue({ ...textTurn("Answered while the database was away"), gate: held });
    const requests = fake.requests.length;
    const before = (await inbox()).length;
    const pending = chat(app, "third question");
    await vi.waitFor(() => expect(fake.requests).toHaveLength(requests + 1));
    await proxy.cut();
    release();
    expect((await pending).status).toBe(503);
    await proxy.restore();
    // Written with the entry's end once the database answers: the model is not asked again.
    await vi.waitFor(
      async () =>
        expect((await inbox())[before]).toMatchObject({
          status: "done",
          response: "Answered while the database was away",
        }),
      { timeout: 20_000, interval: 200 },
    );
    expect(fake.requests).toHaveLength(requests + 1);
    const last = await app.db.query<{ role: string; text: string }>(
      "SELECT role, search_text AS text FROM messages ORDER BY id DESC LIMIT 1",
    );
    expect(last.rows[0]).toEqual({ role: "assistant", text: "Answered while the database was away" });
    fake.enqueue(textTurn("fourth answer"));
    expect((await chat(app, "fourth question")).body.response).toContain(
      "Answered while the database was away",
    );
    // Marked seen after the reply went out (the flag waits up to a second for another write).
    await vi.waitFor(async () => expect((await inbox())[before]?.seen).toBe(true), {
      timeout: 5_000,
      interval: 100,
    });
  });

  it("answers 503 without saving when the database is already down, and loses nothing after", async () => {
    const before = (await inbox()).length;
    await proxy.cut();
    const refused = await chat(app, "while it is down");
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({ error: NOT_SAVED_REPLY });
    await proxy.restore();
    await vi.waitFor(() => app.db.query("SELECT 1"), { timeout: 10_000 });
    expect((await inbox()).length).toBe(before);
    fake.enqueue(textTurn("all good"));
    const ok = await chat(app, "and now?");
    expect(ok.status).toBe(200);
    expect(ok.body.response).toBe("all good");
  });
});
