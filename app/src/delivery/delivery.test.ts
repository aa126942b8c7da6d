import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { silentLogger } from "@stavrobot/common";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import type { Database } from "../db/database.js";
import { InboxStore } from "../db/inbox.js";
import { AnswerDelivery } from "./answers.js";
import { composeFor } from "../channels/registry.js";
import { DeliveryFiles } from "./files.js";
import { DeliveryStore, type Delivery } from "./store.js";
import { DeliveryWorker, type SendResult } from "./worker.js";

let testDb: MigratedTestDatabase;
let db: Database;
let store: DeliveryStore;
let inbox: InboxStore;

/** A channel that records what it sends and answers from a script (ok when the script is empty). */
class ScriptedChannel {
  sent: string[] = [];
  script: SendResult[] = [];
  async send(delivery: Delivery): Promise<SendResult> {
    const result = this.script.shift() ?? { ok: true };
    if (result.ok)
      this.sent.push(`${delivery.recipient}:${delivery.payload.text ?? delivery.payload.attachmentName}`);
    return result;
  }
}

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("delivery");
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

const item = (recipient: string, text: string, key: string) => ({
  channel: "telegram" as const,
  recipient,
  payload: { text },
  key,
});

describe("the deliveries", () => {
  it("queues a key once, however often it is added", async () => {
    expect(await store.add([item("1", "a", "k1"), item("1", "b", "k2")])).toHaveLength(2);
    expect(await store.add([item("1", "a", "k1")])).toHaveLength(0);
    const rows = await db.query("SELECT 1 FROM deliveries");
    expect(rows.rows).toHaveLength(2);
  });

  it("keeps each recipient's messages in order while one waits for a retry, others unaffected", async () => {
    const channel = new ScriptedChannel();
    const worker = new DeliveryWorker({
      store,
      channels: { telegram: channel },
      logger: silentLogger,
      baseDelayMs: 200,
    });
    worker.start();
    channel.script = [{ ok: false, retry: true, error: "Telegram is unreachable" }];
    await store.add([item("1", "part 1", "a1"), item("1", "part 2", "a2"), item("2", "other", "b1")]);
    await worker.kick();
    // "part 1" failed: "part 2" must wait for it; recipient 2 is not held up.
    expect(channel.sent).toEqual(["2:other"]);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await worker.kick();
    expect(channel.sent).toEqual(["2:other", "1:part 1", "1:part 2"]);
    await worker.stop();
  });

  it("gives up on a refusal at once, and on a retryable failure after the last attempt, telling the owner", async () => {
    const channel = new ScriptedChannel();
    const given: string[] = [];
    const worker = new DeliveryWorker({
      store,
      channels: { telegram: channel },
      logger: silentLogger,
      baseDelayMs: 1,
      maxAttempts: 2,
      onGiveUp: async (delivery, error) => void given.push(`${delivery.payload.text}: ${error}`),
    });
    worker.start();
    channel.script = [
      { ok: false, retry: false, error: "chat not found" },
      { ok: false, retry: true, error: "down" },
      { ok: false, retry: true, error: "still down" },
    ];
    const [refused, flaky] = await store.add([item("1", "refused", "r"), item("2", "flaky", "f")]);
    await worker.kick();
    await new Promise((resolve) => setTimeout(resolve, 50));
    await worker.kick();
    expect(given).toEqual(["refused: chat not found", "flaky: still down"]);
    expect(await store.get(refused!.id)).toEqual({ status: "failed", lastError: "chat not found" });
    expect(await store.get(flaky!.id)).toEqual({ status: "failed", lastError: "still down" });
    await worker.stop();
  });

  it("removes the deliveries' copy of an attachment once it is sent", async () => {
    const files = new DeliveryFiles(join(testDb.dir, "outbox"));
    const original = join(testDb.dir, "photo.jpg");
    writeFileSync(original, "jpeg");
    const copy = await files.take(original);
    expect(copy.name).toBe("photo.jpg");
    const channel = new ScriptedChannel();
    const worker = new DeliveryWorker({ store, channels: { telegram: channel }, logger: silentLogger });
    worker.start();
    const [delivery] = await store.add([
      {
        channel: "telegram",
        recipient: "1",
        payload: { attachmentPath: copy.path, attachmentName: copy.name },
        key: "p",
      },
    ]);
    expect(await worker.attemptSoon([delivery!.id], 5_000)).toEqual([{ ok: true }]);
    expect(channel.sent).toEqual(["1:photo.jpg"]);
    expect(existsSync(copy.path)).toBe(false);
    expect(existsSync(original)).toBe(true);
    await worker.stop();
  });
});

describe("composing a message for a channel", () => {
  it("puts short text in the caption of a file, and longer text after it", () => {
    const attachment = { path: "/x/1.png", name: "chart.png" };
    expect(composeFor("telegram", { markdown: "**Chart**", attachment })).toEqual([
      { attachmentPath: "/x/1.png", attachmentName: "chart.png", text: "<b>Chart</b>", format: "html" },
    ]);
    const long = "word ".repeat(400);
    const parts = composeFor("telegram", { markdown: long, attachment });
    expect(parts[0]).toEqual({ attachmentPath: "/x/1.png", attachmentName: "chart.png" });
    expect(parts.slice(1).map((part) => part.format)).toEqual(["html"]);
    expect(composeFor("signal", { markdown: "**hi**", attachment })).toEqual([
      { attachmentPath: "/x/1.png", attachmentName: "chart.png", text: "**hi**", format: "markdown" },
    ]);
    expect(composeFor("telegram", { markdown: "   " })).toEqual([]);
  });
});

describe("answers to their audience", () => {
  async function finished(source: string | null, sender: string | null, response: string): Promise<number> {
    const { entry } = await inbox.add(source, sender, { message: "q", attachments: [] });
    await inbox.finish(entry.id, { status: "done", response: response, outcome: "reply" });
    return entry.id;
  }

  it("writes a received flag with the next message's insert, or alone after a second", async () => {
    const flags = async () =>
      (await db.query<{ id: number; seen: boolean }>("SELECT id, seen FROM inbox ORDER BY id")).rows;
    const first = await finished("cli", null, "one");
    inbox.noteSeen([first]);
    // Not written yet, but no longer offered as a missed answer.
    expect((await flags())[0]).toEqual({ id: first, seen: false });
    expect(await inbox.unseenAnswers({ owner: true }, first + 1)).toEqual([]);
    // The next message's insert carries it: no statement of its own.
    const { entry } = await inbox.add("cli", null, { message: "next", attachments: [] });
    expect((await flags())[0]).toEqual({ id: first, seen: true });
    await inbox.finish(entry.id, { status: "done", response: "two", outcome: "reply" });
    inbox.noteSeen([entry.id]);
    // Nothing follows: written alone after about a second.
    await vi.waitFor(async () => expect((await flags())[1]).toEqual({ id: entry.id, seen: true }), {
      timeout: 5_000,
      interval: 100,
    });
  });

  it("hands an answer to the deliveries once, and a crash between finishing and handing it over loses nothing", async () => {
    const channel = new ScriptedChannel();
    const worker = new DeliveryWorker({ store, channels: { telegram: channel }, logger: silentLogger });
    worker.start();
    const answers = new AnswerDelivery({
      compose: composeFor,
      inbox,
      store,
      worker,
      owner: { telegram: "1001" },
      logger: silentLogger,
    });
    const person = await finished("telegram", "2002", "hello friend");
    await answers.deliver(
      { id: person, source: "telegram", sender: "2002" },
      { kind: "reply", text: "hello friend" },
    );
    await answers.deliver(
      { id: person, source: "telegram", sender: "2002" },
      { kind: "reply", text: "hello friend" },
    );
    // Finished, but the process died before the answer was handed over: found again at start-up.
    const cron = await finished("cron", null, "Water the plants.");
    const console = await finished("cli", null, "for the terminal");
    expect(await answers.recover()).toBe(1);
    await worker.kick();
    expect(channel.sent.sort()).toEqual(["1001:Water the plants.", "2002:hello friend"]);
    // Their "received" flags wait for the next write (or a second); the store leaves them out
    // of what is undelivered meanwhile.
    expect((await inbox.recentUnseen(10)).map((entry) => entry.id)).toEqual([console]);
    await inbox.flushSeen();
    const delivered = await db.query<{ id: number; seen: boolean }>("SELECT id, seen FROM inbox ORDER BY id");
    expect(delivered.rows).toEqual([
      { id: person, seen: true },
      { id: cron, seen: true },
      { id: console, seen: false },
    ]);
    await worker.stop();
  });

  it("takes a subagent's plugin result to its person, to nobody without one, and only its failure to the owner", async () => {
    const channel = new ScriptedChannel();
    const worker = new DeliveryWorker({ store, channels: { telegram: channel }, logger: silentLogger });
    worker.start();
    const answers = new AnswerDelivery({
      compose: composeFor,
      inbox,
      store,
      worker,
      owner: { telegram: "1001" },
      logger: silentLogger,
    });
    const source = "plugin:radar/scan";
    const forFriend = { agentId: 2, replyTo: { channel: "telegram", recipient: "2002" } };
    const forNobody = { agentId: 2 };
    const entries = [
      { payload: forFriend, answer: { kind: "reply" as const, text: "Rain at five, Friend." } },
      { payload: forNobody, answer: { kind: "reply" as const, text: "Noted the rain." } },
      { payload: forNobody, answer: { kind: "error" as const, text: "The model is unreachable." } },
      { payload: {}, answer: { kind: "reply" as const, text: "Rain at five." } },
    ];
    for (const { payload, answer } of entries) {
      const { entry } = await inbox.add(source, null, { message: "result", attachments: [], ...payload });
      await answers.deliver(entry, answer);
    }
    await worker.kick();
    expect(channel.sent.sort()).toEqual([
      "1001:Rain at five.",
      "1001:The model is unreachable.",
      "2002:Rain at five, Friend.",
    ]);
    await worker.stop();
  });
});
