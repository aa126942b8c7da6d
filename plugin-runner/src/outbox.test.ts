import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { chatRequestSchema, closeServer, createServiceClient, listen, silentLogger } from "@stavrobot/common";
import type { ChatRequest } from "@stavrobot/common";
import { Outbox } from "./outbox.js";

/** An app whose `POST /chat` answers with the given statuses in turn (then 200). */
async function scriptedApp(statuses: number[]) {
  const bodies: unknown[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      const status = statuses.shift() ?? 200;
      res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify({ response: "ok" }));
    });
  });
  const port = await listen(server, 0);
  return { bodies, url: `http://127.0.0.1:${port}`, close: () => closeServer(server) };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function makeOutbox(url: string, dir: string): Outbox {
  const outbox = new Outbox({
    dir,
    app: createServiceClient({ baseUrl: url, retries: 0 }),
    logger: silentLogger,
    baseDelayMs: 20,
    maxDelayMs: 100,
  });
  cleanups.push(() => outbox.stop());
  return outbox;
}

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("Outbox", () => {
  it("retries failures with backoff and deletes a message only after a 2xx", async () => {
    const app = await scriptedApp([503, 500, 429]);
    cleanups.push(app.close);
    const dir = mkdtempSync(join(tmpdir(), "outbox-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const outbox = makeOutbox(app.url, dir);
    await outbox.start();
    await outbox.enqueue({ source: "plugin:p/t", message: "first" });
    await outbox.enqueue({ source: "plugin:p/t", message: "second" });
    await until(() => app.bodies.length === 5);
    expect(app.bodies.map((body) => (body as { message: string }).message)).toEqual([
      "first",
      "first",
      "first",
      "first",
      "second",
    ]);
    await until(() => readdirSync(dir).filter((name) => name.endsWith(".json")).length === 0);
  });

  it("moves a message the app refuses outright aside, and cleans half-written files on start", async () => {
    const app = await scriptedApp([400]);
    cleanups.push(app.close);
    const dir = mkdtempSync(join(tmpdir(), "outbox-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, ".tmp-half-written"), "{");
    const outbox = makeOutbox(app.url, dir);
    await outbox.start();
    expect(readdirSync(dir)).toEqual(["failed"]);
    await outbox.enqueue({ source: "plugin:p/t", message: "refused" });
    await until(() => readdirSync(join(dir, "failed")).length === 1);
    expect(await outbox.pending()).toEqual([]);
  });

  it("re-sends without files when the app finds a result too large", async () => {
    const app = await scriptedApp([413]);
    cleanups.push(app.close);
    const dir = mkdtempSync(join(tmpdir(), "outbox-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const outbox = makeOutbox(app.url, dir);
    await outbox.start();
    const files = [{ filename: "big.bin", data: "AAAA", mimeType: "application/octet-stream" }];
    await outbox.enqueue({ source: "plugin:p/t", message: "result", files });
    await until(() => app.bodies.length === 2);
    expect(app.bodies[1]).toEqual({
      source: "plugin:p/t",
      message: "result\n(The app refused the output files as too large: big.bin.)",
      idempotencyKey: (app.bodies[0] as ChatRequest).idempotencyKey,
    });
    await until(() => readdirSync(dir).filter((name) => name.endsWith(".json")).length === 0);
  });

  it("sends one idempotency key per result: the same on every attempt, without files, and after a restart", async () => {
    const app = await scriptedApp([503, 413, 503]);
    cleanups.push(app.close);
    const dir = mkdtempSync(join(tmpdir(), "outbox-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const outbox = makeOutbox(app.url, dir);
    await outbox.start();
    const files = [{ filename: "big.bin", data: "AAAA", mimeType: "application/octet-stream" }];
    await outbox.enqueue({ source: "plugin:p/t", message: "first", files });
    await outbox.enqueue({ source: "plugin:p/t", message: "second" });
    // first: 503, 413 (then re-sent without files), 503, 200; second: 200.
    await until(() => app.bodies.length === 5);
    const bodies = app.bodies as ChatRequest[];
    const keys = bodies.map((body) => body.idempotencyKey);
    for (const body of bodies) expect(chatRequestSchema.safeParse(body).success).toBe(true);
    expect(keys[0]).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);
    expect(keys.slice(0, 4)).toEqual([keys[0], keys[0], keys[0], keys[0]]);
    expect(bodies[3]?.files).toBeUndefined();
    expect(bodies[4]?.message).toBe("second");
    expect(keys[4]).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);
    expect(keys[4]).not.toBe(keys[0]);

    // A result still pending when the runner stops keeps its key in the next process.
    const later = await scriptedApp([503]);
    cleanups.push(later.close);
    const stopping = new Outbox({
      dir,
      app: createServiceClient({ baseUrl: later.url, retries: 0 }),
      logger: silentLogger,
      baseDelayMs: 60_000,
    });
    await stopping.start();
    await stopping.enqueue({ source: "plugin:p/t", message: "third" });
    await until(() => later.bodies.length === 1);
    await stopping.stop();
    const restarted = makeOutbox(later.url, dir);
    await restarted.start();
    await until(() => later.bodies.length === 2);
    const [before, after] = later.bodies as ChatRequest[];
    expect(after?.message).toBe("third");
    expect(after?.idempotencyKey).toBe(before?.idempotencyKey);
    expect([keys[0], keys[4]]).not.toContain(after?.idempotencyKey);
    await until(() => readdirSync(dir).filter((name) => name.endsWith(".json")).length === 0);
  });

  it("refuses to queue a message the app could never accept", async () => {
    const dir = mkdtempSync(join(tmpdir(), "outbox-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const outbox = makeOutbox("http://127.0.0.1:9", dir);
    await outbox.start();
    await expect(outbox.enqueue({ source: "plugin:p/t" })).rejects.toThrow(/invalid chat message/);
  });
});
