import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import { chatRequestSchema } from "../contracts/chat.js";
import { silentLogger } from "../logger.js";
import { createServiceClient } from "../service-client.js";
import { startFakeApp } from "../test-support/fake-app.js";
import type { FakeApp, FakeAppOptions } from "../test-support/fake-app.js";
import { freePort } from "../test-support/net.js";
import { Outbox } from "./outbox.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function makeOutbox(url: string, dir: string, maxRefusals = 8): Outbox {
  const outbox = new Outbox({
    dir,
    keyPrefix: "test-outbox",
    app: createServiceClient({ baseUrl: url, retries: 0 }),
    logger: silentLogger,
    baseDelayMs: 20,
    maxDelayMs: 100,
    maxRefusals,
  });
  cleanups.push(() => outbox.stop());
  return outbox;
}

/** A fresh outbox directory, removed after the test. */
function outboxDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "outbox-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The app's `POST /chat`, closed after the test. */
async function fakeApp(options: FakeAppOptions = {}): Promise<FakeApp> {
  const app = await startFakeApp(options);
  cleanups.push(app.close);
  return app;
}

/** Entries still waiting in the outbox directory. */
const pendingIn = (dir: string) => readdirSync(dir).filter((name) => name.endsWith(".json"));

describe("Outbox", () => {
  it("retries each message on its own backoff, so a failing one never holds up the next", async () => {
    const app = await fakeApp({
      answer: (body, attempt) => (body.message === "first" && attempt <= 3 ? 503 : undefined),
    });
    const dir = outboxDir();
    const outbox = makeOutbox(app.url, dir);
    await outbox.start();
    await outbox.enqueue({ source: "plugin:p/t", message: "first" });
    await outbox.enqueue({ source: "plugin:p/t", message: "second" });
    await vi.waitFor(() => expect(app.messages).toHaveLength(5), 5_000);
    const order = app.messages.map((body) => body.message);
    // "second" went through at its first attempt, while "first" was still failing.
    expect(order.indexOf("second")).toBeLessThan(order.lastIndexOf("first"));
    expect(order.filter((m) => m === "first")).toHaveLength(4);
    // Delivered without waiting for the turn the message starts.
    expect(app.prefer.every((value) => value === "respond-async")).toBe(true);
    await vi.waitFor(() => expect(pendingIn(dir)).toEqual([]), 5_000);
  });

  it("sets aside a message the app keeps refusing, tells the owner, and keeps delivering the rest", async () => {
    const app = await fakeApp({
      answer: (body) => (body.message?.includes("\uFFFD poison") ? 500 : undefined),
    });
    const dir = outboxDir();
    const outbox = makeOutbox(app.url, dir, 3);
    await outbox.start();
    // Text the app could never store is made storable before it is queued.
    await outbox.enqueue({ source: "plugin:bin/dump", message: "\u0000 poison" });
    await outbox.enqueue({ source: "plugin:p/t", message: "healthy" });
    await vi.waitFor(() => expect(readdirSync(join(dir, "failed"))).toHaveLength(1), 5_000);
    const messages = app.messages.map((body) => body.message ?? "");
    expect(messages.filter((m) => m.includes("poison"))).toHaveLength(3);
    expect(messages.indexOf("healthy")).toBeLessThan(2);
    expect(messages.join("")).not.toContain("\u0000");
    const notice = await vi.waitFor(() => {
      const found = app.messages.find((body) => /could not be delivered/.test(body.message ?? ""));
      if (!found) throw new Error("no notice yet");
      return found;
    }, 5_000);
    expect(notice.source).toBe("plugin:bin/dump");
    expect(notice.message).toContain("set aside");
    await vi.waitFor(() => expect(pendingIn(dir)).toEqual([]), 5_000);
  });

  it("never gives up on a message while the app is only unreachable", async () => {
    const port = await freePort();
    const dir = outboxDir();
    const outbox = makeOutbox(`http://127.0.0.1:${port}`, dir, 2);
    await outbox.start();
    await outbox.enqueue({ source: "plugin:p/t", message: "patience" });
    // Long enough for many failed attempts.
    await sleep(600);
    expect(readdirSync(join(dir, "failed"))).toEqual([]);
    const stored = JSON.parse(readFileSync(join(dir, (await outbox.pending())[0] as string), "utf8"));
    expect(stored.attempts).toBeGreaterThan(2);
    expect(stored.refusals ?? 0).toBe(0);
    const app = await fakeApp();
    await outbox.stop();
    const later = makeOutbox(app.url, dir, 2);
    await later.start();
    await vi.waitFor(() => expect(app.messages).toHaveLength(1), 5_000);
  });

  it("moves a message the app refuses outright aside, and cleans half-written files on start", async () => {
    const app = await fakeApp({ statuses: [400] });
    const dir = outboxDir();
    writeFileSync(join(dir, ".tmp-half-written"), "{");
    const outbox = makeOutbox(app.url, dir);
    await outbox.start();
    expect(readdirSync(dir)).toEqual(["failed"]);
    await outbox.enqueue({ source: "plugin:p/t", message: "refused" });
    await vi.waitFor(() => expect(readdirSync(join(dir, "failed"))).toHaveLength(1), 5_000);
    // The owner hears of it (that notice went through).
    await vi.waitFor(() => expect(app.messages).toHaveLength(2), 5_000);
    expect(await outbox.pending()).toEqual([]);
  });

  it("re-sends without files when the app finds a result too large", async () => {
    const app = await fakeApp({ statuses: [413] });
    const dir = outboxDir();
    const outbox = makeOutbox(app.url, dir);
    await outbox.start();
    const files = [{ filename: "big.bin", data: "AAAA", mimeType: "application/octet-stream" }];
    await outbox.enqueue({ source: "plugin:p/t", message: "result", files });
    await vi.waitFor(() => expect(app.messages).toHaveLength(2), 5_000);
    expect(app.messages[1]).toEqual({
      source: "plugin:p/t",
      message: "result\n(The app refused the output files as too large: big.bin.)",
      idempotencyKey: app.messages[0]?.idempotencyKey,
    });
    await vi.waitFor(() => expect(pendingIn(dir)).toEqual([]), 5_000);
  });

  it("sends one idempotency key per result: the same on every attempt, without files, and after a restart", async () => {
    const app = await fakeApp({
      answer: (body, attempt) =>
        body.message?.startsWith("first") ? [503, 413, 503][attempt - 1] : undefined,
    });
    const dir = outboxDir();
    const outbox = makeOutbox(app.url, dir);
    await outbox.start();
    const files = [{ filename: "big.bin", data: "AAAA", mimeType: "application/octet-stream" }];
    await outbox.enqueue({ source: "plugin:p/t", message: "first", files });
    await outbox.enqueue({ source: "plugin:p/t", message: "second" });
    // first: 503, 413 (then re-sent without files), 503, 200; second: 200.
    await vi.waitFor(() => expect(app.messages).toHaveLength(5), 5_000);
    const all = app.messages;
    for (const body of all) expect(chatRequestSchema.safeParse(body).success).toBe(true);
    const firsts = all.filter((body) => body.message?.startsWith("first"));
    const second = all.find((body) => body.message === "second");
    const keys = firsts.map((body) => body.idempotencyKey);
    expect(keys[0]).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);
    expect(keys).toEqual([keys[0], keys[0], keys[0], keys[0]]);
    expect(firsts[3]?.files).toBeUndefined();
    expect(second?.idempotencyKey).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);
    expect(second?.idempotencyKey).not.toBe(keys[0]);

    // A result still pending when the runner stops keeps its key in the next process.
    const later = await fakeApp({ statuses: [503] });
    const stopping = new Outbox({
      dir,
      keyPrefix: "test-outbox",
      app: createServiceClient({ baseUrl: later.url, retries: 0 }),
      logger: silentLogger,
      baseDelayMs: 60_000,
    });
    await stopping.start();
    await stopping.enqueue({ source: "plugin:p/t", message: "third" });
    await vi.waitFor(() => expect(later.messages).toHaveLength(1), 5_000);
    await stopping.stop();
    const restarted = makeOutbox(later.url, dir);
    await restarted.start();
    await vi.waitFor(() => expect(later.messages).toHaveLength(2), 5_000);
    const [before, after] = later.messages;
    expect(after?.message).toBe("third");
    expect(after?.idempotencyKey).toBe(before?.idempotencyKey);
    expect([keys[0], second?.idempotencyKey]).not.toContain(after?.idempotencyKey);
    await vi.waitFor(() => expect(pendingIn(dir)).toEqual([]), 5_000);
  });

  it("refuses to queue a message the app could never accept", async () => {
    const dir = outboxDir();
    const outbox = makeOutbox("http://127.0.0.1:9", dir);
    await outbox.start();
    await expect(outbox.enqueue({ source: "plugin:p/t" })).rejects.toThrow(/invalid chat message/);
  });
});
