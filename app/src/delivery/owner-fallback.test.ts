import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import { CHANNELS } from "../channels/registry.js";
import type { Database } from "../db/database.js";
import { InboxStore, type UnseenAnswer } from "../db/inbox.js";
import { OwnerFallback } from "./owner-fallback.js";
import { DeliveryStore, type Channel, type Delivery } from "./store.js";
import { DeliveryWorker, type SendResult } from "./worker.js";

/**
 * The owner's messages their channel cannot deliver, kept for their consoles: the deliveries'
 * worker with `OwnerFallback` as its follow-up, channels that answer from a script, a real
 * database.
 */
let testDb: MigratedTestDatabase;
let db: Database;
let store: DeliveryStore;
let inbox: InboxStore;

const OWNER = { telegram: "1001", signal: "+15550002222" };

class ScriptedChannel {
  sent: string[] = [];
  script: SendResult[] = [];
  async send(delivery: Delivery): Promise<SendResult> {
    const result = this.script.shift() ?? { ok: true };
    if (result.ok) this.sent.push(`${delivery.recipient}:${delivery.payload.text}`);
    return result;
  }
}

const DOWN: SendResult = { ok: false, retry: true, channelDown: true, error: "signal-cli is not installed" };
const BLIP: SendResult = { ok: false, retry: true, error: "Bad Gateway" };

/** A worker that retries only when kicked (its retries are far off), with the owner's fallback. */
function setUp(options: { graceMs?: number; maxAttempts?: number } = {}) {
  const telegram = new ScriptedChannel();
  const signal = new ScriptedChannel();
  const kept: UnseenAnswer[] = [];
  const deliveredLater: number[] = [];
  const givenUp: string[] = [];
  const worker = new DeliveryWorker({
    store,
    channels: { telegram, signal },
    logger: silentLogger,
    baseDelayMs: 60_000,
    maxAttempts: options.maxAttempts ?? 30,
    onGiveUp: async (delivery) => {
      if (delivery.keptInboxId === null) givenUp.push(String(delivery.payload.text));
    },
    followUp: new OwnerFallback({
      db,
      inbox,
      owner: OWNER,
      channels: CHANNELS,
      onKept: (answer) => kept.push(answer),
      onDeliveredLater: async (id) => void deliveredLater.push(id),
      logger: silentLogger,
      graceMs: options.graceMs ?? 60_000,
    }),
  });
  worker.start();
  return { telegram, signal, kept, deliveredLater, givenUp, worker };
}

const item = (channel: Channel, recipient: string, text: string, key: string) => ({
  channel,
  recipient,
  payload: { text },
  key,
});

/** Lets every pending delivery be tried at the next kick. */
const dueNow = () => db.query("UPDATE deliveries SET next_attempt_at = now() WHERE status = 'pending'");

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("owner-fallback");
  db = testDb.db;
  store = new DeliveryStore(db);
  inbox = new InboxStore(db);
}, 120_000);

beforeEach(async () => {
  await db.query("TRUNCATE deliveries, inbox RESTART IDENTITY CASCADE");
});

afterAll(async () => {
  await testDb?.close();
});

describe("the owner's messages their channel cannot deliver", () => {
  it("are kept at once when the channel is down, with those queued behind; other people's are not", async () => {
    const { signal, kept, worker } = setUp();
    signal.script = [DOWN, DOWN];
    const [first, second, friend] = await store.add([
      item("signal", OWNER.signal, "Water the plants.", "answer:1:0"),
      item("signal", OWNER.signal, "Call mum.", "answer:2:0"),
      item("signal", "+15550003333", "Hello friend.", "answer:3:0"),
    ]);
    await worker.kick();
    expect(kept.map((answer) => [answer.source, answer.title])).toEqual([
      ["delivery", "Water the plants."],
      ["delivery", "Call mum."],
    ]);
    expect(kept[0]?.response).toBe(
      "Signal could not deliver this to you: signal-cli is not installed.\n\nWater the plants.\n\n" +
        "_You have it here now, so it is not sent on Signal as well._",
    );
    // Still queued for Signal, each marked with its notice; the friend's is only retried.
    const rows = await db.query<{ id: number; status: string; kept_inbox_id: number | null }>(
      "SELECT id, status, kept_inbox_id FROM deliveries ORDER BY id",
    );
    expect(rows.rows).toEqual([
      { id: first?.id, status: "pending", kept_inbox_id: kept[0]?.id },
      { id: second?.id, status: "pending", kept_inbox_id: kept[1]?.id },
      { id: friend?.id, status: "pending", kept_inbox_id: null },
    ]);
    // Kept once, however often the worker looks again.
    await dueNow();
    signal.script = [DOWN, DOWN];
    await worker.kick();
    expect(kept).toHaveLength(2);
    await worker.stop();
  });

  it("are left to the retries for the grace time when the channel only blips, and kept after it", async () => {
    const { telegram, signal, kept, worker } = setUp({ graceMs: 300 });
    telegram.script = [BLIP];
    // A rate limit that asks for an hour: the channel cannot send for now, kept at once.
    signal.script = [
      { ok: false, retry: true, error: "Signal rate-limited this message", retryAfterMs: 3_600_000 },
    ];
    await store.add([
      item("telegram", OWNER.telegram, "Stretch.", "answer:1:0"),
      item("signal", OWNER.signal, "Drink water.", "answer:2:0"),
    ]);
    await worker.kick();
    expect(kept.map((answer) => answer.title)).toEqual(["Drink water."]);
    await new Promise((resolve) => setTimeout(resolve, 350));
    await worker.kick();
    expect(kept.map((answer) => answer.response.split("\n")[0])).toEqual([
      "Signal could not deliver this to you: Signal rate-limited this message.",
      "Telegram could not deliver this to you: Bad Gateway.",
    ]);
    await worker.stop();
  });

  it("keep a message's parts as one notice, sent later: its notice is withdrawn from the owner", async () => {
    const { telegram, kept, deliveredLater, worker } = setUp();
    telegram.script = [{ ...DOWN, error: "Telegram is unreachable" }];
    await store.add([
      item("telegram", OWNER.telegram, "Part one.", "answer:7:0"),
      item("telegram", OWNER.telegram, "Part two.", "answer:7:1"),
    ]);
    await worker.kick();
    expect(kept).toHaveLength(1);
    expect(kept[0]?.response).toContain("Part one.\n\nPart two.");
    await dueNow();
    await worker.kick();
    expect(telegram.sent).toEqual(["1001:Part one.", "1001:Part two."]);
    // Once the last part is sent, not before.
    expect(deliveredLater).toEqual([kept[0]?.id]);
    await worker.stop();
  });

  it("are withdrawn from the channel once a console showed their notice, and not sent there", async () => {
    const { signal, kept, deliveredLater, worker } = setUp();
    signal.script = [DOWN];
    const [reminder] = await store.add([item("signal", OWNER.signal, "Feed the cat.", "answer:1:0")]);
    await worker.kick();
    await inbox.markSeen([kept[0]?.id ?? 0]);
    await store.add([item("signal", OWNER.signal, "Hello.", "answer:2:0")]);
    await dueNow();
    await worker.kick();
    expect(signal.sent).toEqual([`${OWNER.signal}:Hello.`]);
    expect(await store.get(reminder?.id ?? 0)).toEqual({
      status: "withdrawn",
      lastError: "signal-cli is not installed; shown to the owner on their console instead",
    });
    expect(deliveredLater).toEqual([]);
    await worker.stop();
  });

  it("give no second notice when given up: the owner has the first", async () => {
    const { signal, kept, givenUp, worker } = setUp({ maxAttempts: 2 });
    signal.script = [DOWN, DOWN];
    await store.add([item("signal", OWNER.signal, "Pay the rent.", "answer:1:0")]);
    await worker.kick();
    await dueNow();
    await worker.kick();
    const [row] = (await db.query<{ status: string }>("SELECT status FROM deliveries")).rows;
    expect(row?.status).toBe("failed");
    expect(kept).toHaveLength(1);
    expect(givenUp).toEqual([]);
    await worker.stop();
  });
});
