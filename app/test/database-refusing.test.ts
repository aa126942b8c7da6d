import { readdirSync } from "node:fs";
import { setTimeout } from "node:timers/promises";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { NOT_SAVED_REPLY, SAVED_WILL_RUN_REPLY } from "../src/routes/chat.js";
import { STEERING_REPLY } from "../src/queue/replies.js";
import { chat, configFor, createTestEnv, post, type ChatCall, type TestEnv } from "./helpers/app.js";

/**
 * The database server refusing connections (`ALLOW_CONNECTIONS false`) with the app's sessions
 * ended (`pg_terminate_backend`): what a restart of the server, or an administrator, does. Its
 * errors at connect time carry SQLSTATEs of their own (55000 here), which must be an outage like
 * any other failure to reach the database.
 */
const serverUrl = process.env.TEST_DATABASE_URL;

describe.runIf(serverUrl)("a database server that refuses connections", () => {
  let fake: FakeLlmServer;
  let testEnv: TestEnv;
  let app: RunningApp;
  let admin: pg.Client;
  let name: string;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    testEnv = await createTestEnv(configFor(fake));
    name = new URL(testEnv.env.DATABASE_URL as string).pathname.slice(1);
    admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    app = await startApp({ env: testEnv.env, logger: silentLogger });
  });

  afterAll(async () => {
    await admin?.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`).catch(() => undefined);
    await app?.close();
    await admin?.end();
    await fake?.close();
    await testEnv?.cleanup();
  });

  beforeEach(() => fake.reset());

  /** Refuses new connections and ends every session the app has open. */
  async function refuse(): Promise<void> {
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [name]);
  }
  async function allow(): Promise<void> {
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
  }

  const inboxRows = async () =>
    (
      await app.db.query<{ id: number; message: string; status: string; response: string | null }>(
        "SELECT id, payload->>'message' AS message, status, response FROM inbox ORDER BY id",
      )
    ).rows;
  const uploads = () => readdirSync(join(testEnv.dir, "files", "uploads"), { withFileTypes: true }).length;

  it("answers 503 with Retry-After and keeps nothing of a message it could not save", async () => {
    fake.enqueue(textTurn("must not be answered"));
    const before = (await inboxRows()).length;
    await refuse();
    try {
      // The idle queue's fast path (its turn starts while the row is written) and the plain insert
      // (a message with an idempotency key), each with a file that must not be kept.
      const files = [
        { filename: "note.txt", mimeType: "text/plain", data: Buffer.from("hi").toString("base64") },
      ];
      const idle = await post(app.port, "/chat", { message: "while refused", source: "cli", files });
      const keyed = await post(app.port, "/chat", {
        message: "while refused, keyed",
        source: "cli",
        idempotencyKey: "refused-1",
        files,
      });
      for (const answer of [idle, keyed]) {
        expect(answer.status).toBe(503);
        expect(answer.body).toEqual({ error: NOT_SAVED_REPLY });
        expect(Number(answer.headers.get("retry-after"))).toBeGreaterThan(0);
      }
    } finally {
      await allow();
    }
    await vi.waitFor(() => app.db.query("SELECT 1"), { timeout: 10_000 });
    expect((await inboxRows()).length).toBe(before);
    expect(uploads()).toBe(0);
    // Nothing of the refused messages lingers: the next message is answered as usual.
    fake.reset();
    fake.enqueue(textTurn("back to normal"));
    const next = await chat(app, "and now?");
    expect(next).toMatchObject({ status: 200, body: { response: "back to normal" } });
    expect((await inboxRows()).at(-1)).toMatchObject({ message: "and now?", status: "done" });
  });

  it("refuses a message whose insert the outage cut off, and the model call it made spoils nothing", async () => {
    // The idle queue asks the model while the message's row is written; that insert waits for a
    // lock, so the model has answered (and its cost is counted) before the outage ends it.
    const locker = new pg.Client({ connectionString: testEnv.env.DATABASE_URL });
    locker.on("error", () => {});
    await locker.connect();
    await locker.query("BEGIN");
    await locker.query("LOCK TABLE inbox IN EXCLUSIVE MODE");
    fake.enqueue(textTurn("answered before the message was saved"));
    const before = app.meter.spent().daily;
    const pending = chat(app, "cut off while saved");
    await vi.waitFor(() => expect(app.meter.spent().daily).toBeGreaterThan(before), { timeout: 10_000 });
    await refuse();
    let answer: ChatCall;
    try {
      answer = await pending;
    } finally {
      await allow();
      await locker.end().catch(() => undefined);
    }
    expect(answer.status).toBe(503);
    expect(answer.body).toEqual({ error: NOT_SAVED_REPLY });
    expect(answer.headers.get("retry-after")).not.toBeNull();
    await vi.waitFor(() => app.db.query("SELECT 1"), { timeout: 10_000 });

    fake.enqueue(textTurn("still fine"));
    expect(await chat(app, "next one")).toMatchObject({ status: 200, body: { response: "still fine" } });
    const kept = await app.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM messages WHERE search_text LIKE '%cut off while saved%'",
    );
    expect(kept.rows[0]?.n).toBe(0);
    expect((await inboxRows()).map((row) => row.message)).not.toContain("cut off while saved");
    // The call cost what it cost: counted, without a link to a message that does not exist.
    const usage = await app.db.query<{ linked: number; unlinked: number }>(
      "SELECT count(inbox_id)::int AS linked, count(*) FILTER (WHERE inbox_id IS NULL)::int AS unlinked FROM usage WHERE kind = 'turn'",
    );
    expect(usage.rows[0]?.unlinked).toBe(1);
  });

  it("never answers a saved message as failed: it runs when the database is back", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    fake.setResponder((request) => {
      calls++;
      // The first turn asks for a tool as the database goes: the call cannot be recorded.
      if (calls === 1) return { ...toolTurn("execute_sql", { query: "SELECT 1" }), gate: held };
      const text = /Text: (.*)/.exec(request.lastUserText)?.[1] ?? "?";
      return textTurn(`answer to ${text}`);
    });
    const before = (await inboxRows()).length;
    const running = chat(app, "a turn under way");
    await vi.waitFor(() => expect(fake.requests).toHaveLength(1), { timeout: 10_000 });
    // Saved before the outage: one steers the running turn, one (not the owner's console) waits.
    const steering = await chat(app, "also this");
    expect(steering.body.response).toBe(STEERING_REPLY);
    const waiting = post(app.port, "/chat", { message: "queued behind", source: "cron" });
    await vi.waitFor(async () => expect(await inboxRows()).toHaveLength(before + 3), { timeout: 10_000 });

    await refuse();
    let during: ChatCall[];
    let saved: ChatCall[];
    try {
      release();
      saved = await Promise.all([running, waiting]);
      // Messages arriving while it is down: none is saved, each is told so.
      during = await Promise.all([1, 2, 3].map((n) => chat(app, `during ${n}`)));
    } finally {
      await allow();
    }
    for (const answer of saved) {
      expect(answer.status).toBe(503);
      expect(answer.body).toEqual({ error: SAVED_WILL_RUN_REPLY, saved: true });
      // Sending it again would run it twice.
      expect(answer.headers.get("retry-after")).toBeNull();
    }
    for (const answer of during) {
      expect(answer.status).toBe(503);
      expect(answer.body).toEqual({ error: NOT_SAVED_REPLY });
      expect(answer.headers.get("retry-after")).not.toBeNull();
    }
    // Each saved message ran once the database was back, the interrupted turn from its start.
    await vi.waitFor(
      async () =>
        expect((await inboxRows()).slice(before)).toEqual([
          expect.objectContaining({
            message: "a turn under way",
            status: "done",
            response: "answer to a turn under way",
          }),
          expect.objectContaining({ message: "also this", status: "done", response: "answer to also this" }),
          expect.objectContaining({
            message: "queued behind",
            status: "done",
            response: "answer to queued behind",
          }),
        ]),
      { timeout: 20_000, interval: 200 },
    );
  });

  it("keeps its word to every sender while messages keep arriving through a refusal", async () => {
    // A model taking 200 ms per answer; owner messages (which steer) and others (which queue).
    fake.setResponder(async () => {
      await setTimeout(200);
      return textTurn("ok");
    });
    const calls: { text: string; answer: Promise<ChatCall> }[] = [];
    let refused = 0;
    const send = (i: number) => {
      const text = `stream ${i}`;
      const body = { message: text, source: i % 4 === 3 ? "cron" : "cli" };
      const answer = post(app.port, "/chat", body);
      void answer.then((reply) => {
        if (reply.status === 503 && !reply.body.saved) refused++;
      });
      calls.push({ text, answer });
    };
    let i = 0;
    // Messages arrive every 50 ms: the refusal starts while a turn runs and lasts until 40 were
    // refused (two seconds or more); the stream goes on a little after it ends.
    while (fake.requests.length === 0) {
      send(i++);
      await setTimeout(50);
    }
    await refuse();
    try {
      // (Bounded, so that a refusal answered otherwise fails below rather than by a timeout.)
      for (const last = i + 150; refused < 40 && i < last;) {
        send(i++);
        await setTimeout(50);
      }
    } finally {
      await allow();
    }
    for (const end = i + 10; i < end; i++) {
      send(i);
      await setTimeout(50);
    }
    const answers = await Promise.all(calls.map((call) => call.answer));
    await vi.waitFor(
      async () => {
        const open = await app.db.query("SELECT 1 FROM inbox WHERE status NOT IN ('done', 'failed')");
        expect(open.rows).toHaveLength(0);
      },
      { timeout: 30_000, interval: 200 },
    );
    const rows = await app.db.query<{ message: string; status: string; response: string; n: number }>(
      `SELECT payload->>'message' AS message, max(status) AS status, max(response) AS response,
              count(*)::int AS n
       FROM inbox WHERE payload->>'message' LIKE 'stream %' GROUP BY 1`,
    );
    const byText = new Map(rows.rows.map((row) => [row.message, row]));
    const broken = calls.flatMap(({ text }, n) => {
      const answer = answers[n] as ChatCall;
      const row = byText.get(text);
      const notSaved = answer.status === 503 && !answer.body.saved;
      const fine = notSaved
        ? row === undefined && answer.headers.get("retry-after") !== null
        : (answer.status === 200 || answer.body.saved === true) &&
          row?.n === 1 &&
          row.status === "done" &&
          !String(answer.body.response ?? "").startsWith("Something went wrong") &&
          !row.response.startsWith("Something went wrong");
      return fine
        ? []
        : [`${text}: ${answer.status} ${JSON.stringify(answer.body)} / ${JSON.stringify(row)}`];
    });
    expect(broken).toEqual([]);
  }, 90_000);
});

/** The embedded database has no connection to lose; what applies is its being closed under the app. */
describe.runIf(!serverUrl)("the embedded database closed while the app listens", () => {
  let fake: FakeLlmServer;
  let testEnv: TestEnv;
  let app: RunningApp;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    testEnv = await createTestEnv(configFor(fake));
    app = await startApp({ env: testEnv.env, logger: silentLogger });
  });

  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await testEnv?.cleanup();
  });

  it("answers 503 with Retry-After, never 500", async () => {
    fake.enqueue(textTurn("ok"));
    expect((await chat(app, "before")).body.response).toBe("ok");
    await app.db.close();
    for (const body of [
      { message: "after", source: "cli" },
      { message: "after, keyed", source: "cli", idempotencyKey: "closed-1" },
    ]) {
      const answer = await post(app.port, "/chat", body);
      expect(answer.status).toBe(503);
      expect(answer.body).toEqual({ error: NOT_SAVED_REPLY });
      expect(answer.headers.get("retry-after")).not.toBeNull();
    }
    const page = await post(app.port, "/api/answers/seen", { ids: [1] });
    expect(page.status).toBe(503);
    expect(page.headers.get("retry-after")).not.toBeNull();
  });
});
