import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { Server } from "node:http";
import {
  Router,
  closeServer,
  createHttpServer,
  createRequestListener,
  listen,
  silentLogger,
} from "@stavrobot/common";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import { openEventStream } from "../../test/helpers/event-stream.js";
import { DatabaseUnavailableError } from "../db/database.js";
import { InboxStore, type UnseenAnswer } from "../db/inbox.js";
import { ANSWER_EVENT, LiveEvents } from "../live/events.js";
import { addEventRoutes, type EventRouteDeps } from "./events.js";

let testDb: MigratedTestDatabase;
let inbox: InboxStore;
let live: LiveEvents;
let server: Server | undefined;

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("events");
}, 120_000);

afterAll(() => testDb.close());

beforeEach(async () => {
  await testDb.db.query("TRUNCATE inbox RESTART IDENTITY CASCADE");
  inbox = new InboxStore(testDb.db);
  live = new LiveEvents();
});

afterEach(async () => {
  live.close();
  if (server) await closeServer(server);
  server = undefined;
});

/** The events route alone on a real HTTP server, receiving a request bounded to 300 ms. */
async function serve(deps: Partial<EventRouteDeps> = {}): Promise<string> {
  const router = new Router();
  addEventRoutes(router, { live, inbox, logger: silentLogger, ...deps });
  server = createHttpServer(createRequestListener(router, { logger: silentLogger }), {
    requestTimeoutMs: 300,
  });
  return `http://127.0.0.1:${await listen(server, 0)}/api/events`;
}

/** A finished turn nobody waited for, kept for the owner, and published as the app does. */
async function keep(text: string, publish = true): Promise<UnseenAnswer> {
  const answer = await inbox.addNotice("cron", `about ${text}`, text);
  if (publish) live.publish(ANSWER_EVENT, answer);
  return answer;
}

describe("GET /api/events", () => {
  it("keeps a quiet stream open with comments, past the time allowed to receive a request", async () => {
    const client = await openEventStream(await serve({ heartbeatMs: 40 }));
    await client.first("ready");
    // Ten heartbeats: well past the 300 ms the server gives a request to arrive.
    await vi.waitFor(() => expect(client.comments.length).toBeGreaterThanOrEqual(10), { timeout: 5_000 });
    expect(new Set(client.comments)).toEqual(new Set(["keep-alive"]));
    await keep("still there");
    await client.until(() =>
      expect(client.of("answer").map((event) => event.data.response)).toEqual(["still there"]),
    );
    client.close();
  });

  it("forgets a client that went away, and leaves nothing behind", async () => {
    const url = await serve();
    const clients = await Promise.all([openEventStream(url), openEventStream(url), openEventStream(url)]);
    await Promise.all(clients.map((client) => client.first("ready")));
    expect(live.size).toEqual({ listeners: 3, streams: 3 });
    clients[0]?.close();
    clients[1]?.close();
    await vi.waitFor(() => expect(live.size).toEqual({ listeners: 1, streams: 1 }));
    await keep("for the one left");
    await clients[2]?.first("answer");
    clients[2]?.close();
    await vi.waitFor(() => expect(live.size).toEqual({ listeners: 0, streams: 0 }));
  });

  it("drops a client that stopped reading instead of buffering for it without end", async () => {
    const url = await serve();
    const reader = await openEventStream(url);
    await reader.first("ready");
    reader.pause();
    // Far more than the socket's buffers hold: what is left waits in the server, up to 1 MB.
    const big = "x".repeat(100 * 1024);
    for (let n = 0; n < 400 && live.size.streams > 0; n++) {
      live.publish(ANSWER_EVENT, { id: n, source: "cron", message: "", response: big });
      await new Promise((resolve) => setImmediate(resolve));
    }
    await vi.waitFor(() => expect(live.size).toEqual({ listeners: 0, streams: 0 }));
    reader.close();
  });

  it("ends its streams properly when the app stops, and opens none after", async () => {
    const url = await serve();
    const client = await openEventStream(url);
    await client.first("ready");
    live.close();
    // Ended by the server, not cut: closing the listener need not wait for it.
    expect(await client.ended).toBe("end");
    expect(live.size).toEqual({ listeners: 0, streams: 0 });
    const late = await openEventStream(url);
    expect(late.status).toBe(503);
    live.publish(ANSWER_EVENT, { id: 1 });
    expect(live.latest).toBe(0);
  });

  it("sends an answer kept during the catch-up once, and one published meanwhile after it", async () => {
    const early = await keep("kept while the catch-up is read", false);
    let other: UnseenAnswer | undefined;
    const url = await serve({
      inbox: {
        // The answer's event is published while its row is being read, and another one's too.
        unseenAnswers: async (...args) => {
          const rows = await inbox.unseenAnswers(...args);
          live.publish(ANSWER_EVENT, early);
          other = await keep("kept just after");
          return rows;
        },
        stillUnseen: (ids) => inbox.stillUnseen(ids),
      },
    });
    const client = await openEventStream(url);
    await client.until(() => expect(client.of("answer")).toHaveLength(2));
    expect(client.events.map((event) => [event.type, event.data.response ?? event.data.missed])).toEqual([
      ["answer", "kept while the catch-up is read"],
      ["ready", 1],
      ["answer", "kept just after"],
    ]);
    // Only live and replayed events carry a cursor: the catch-up from the database has none.
    expect(client.events.map((event) => event.id === undefined)).toEqual([true, false, false]);
    expect(client.of("answer")[1]?.data.id).toBe(other?.id);
    client.close();
  });

  it("ends the stream when the database cannot say what was missed; the client comes back for it", async () => {
    const url = await serve({
      inbox: {
        unseenAnswers: () => Promise.reject(new DatabaseUnavailableError("down")),
        stillUnseen: () => Promise.reject(new DatabaseUnavailableError("down")),
      },
    });
    const client = await openEventStream(url);
    expect(client.status).toBe(200);
    expect(await client.ended).toBe("end");
    expect(client.events).toEqual([]);
    expect(live.size).toEqual({ listeners: 0, streams: 0 });
  });
});

describe("LiveEvents cursors", () => {
  it("knows a cursor while every event after it is kept, and no other start's", () => {
    const other = new LiveEvents();
    expect(live.position(live.cursor(0))).toBe(0);
    for (let n = 0; n < 1_001; n++) live.publish("tick", { n });
    expect(live.position(live.cursor(1_001))).toBe(1_001);
    expect(live.position(live.cursor(1))).toBe(1);
    // Event 1 was dropped from the journal: from cursor 0, something is missing.
    expect(live.position(live.cursor(0))).toBeUndefined();
    expect(live.position(live.cursor(1_002))).toBeUndefined();
    expect(live.position(other.cursor(5))).toBeUndefined();
    for (const garbled of ["", ".", "5", `${live.cursor(5)}x`, `${live.cursor(5)}.5`, live.cursor(-1)])
      expect(live.position(garbled)).toBeUndefined();
    expect(live.between(999, 1_001).map((published) => published.event.data)).toEqual([
      { n: 999 },
      { n: 1_000 },
    ]);
  });
});
