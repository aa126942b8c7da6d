import { describe, it, expect, beforeAll, afterAll, beforeEach, vi } from "vitest";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { ServiceError } from "./errors.js";
import { createServiceClient } from "./service-client.js";
import { freePort } from "./test-support/net.js";

interface Seen {
  method: string;
  url: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: string;
}

type Responder = (req: IncomingMessage, res: ServerResponse, attempt: number) => void;

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(text);
}

async function catchError(promise: Promise<unknown>): Promise<ServiceError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ServiceError);
    return error as ServiceError;
  }
  throw new Error("expected the request to fail");
}

describe("createServiceClient", () => {
  let server: Server;
  let base: string;
  let seen: Seen[] = [];
  let responder: Responder = (_req, res) => reply(res, 200, {});

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        seen.push({
          method: req.method ?? "",
          url: req.url ?? "",
          authorization: req.headers.authorization,
          contentType: req.headers["content-type"],
          body: Buffer.concat(chunks).toString("utf8"),
        });
        responder(req, res, seen.length);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  beforeEach(() => {
    seen = [];
    responder = (_req, res) => reply(res, 200, {});
  });

  const noSleep = async (): Promise<void> => {};

  it("sends the Bearer header, the JSON body and strips a trailing slash from baseUrl", async () => {
    responder = (_req, res) => reply(res, 201, { id: 7 });
    const client = createServiceClient({ baseUrl: base + "//", bearer: "sibling-secret" });
    expect(client.baseUrl).toBe(base);
    const result = await client.request("POST", "/things?x=1", { body: { name: "a" } });
    expect(result).toEqual({ status: 201, data: { id: 7 } });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toEqual({
      method: "POST",
      url: "/things?x=1",
      authorization: "Bearer sibling-secret",
      contentType: "application/json",
      body: '{"name":"a"}',
    });
  });

  it("sends no Authorization or Content-Type without a bearer or a body", async () => {
    const client = createServiceClient({ baseUrl: base });
    await client.request("GET", "/plain");
    expect(seen[0]?.authorization).toBeUndefined();
    expect(seen[0]?.contentType).toBeUndefined();
    expect(seen[0]?.body).toBe("");
  });

  it("returns a non-JSON 2xx body as text", async () => {
    responder = (_req, res) => {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("just text");
    };
    const client = createServiceClient({ baseUrl: base });
    expect(await client.request("GET", "/text")).toEqual({ status: 200, data: "just text" });
  });

  it("validates a 2xx body with the schema and returns the parsed data", async () => {
    responder = (_req, res) => reply(res, 200, { ok: true, count: 3, extra: "dropped" });
    const client = createServiceClient({ baseUrl: base });
    const schema = z.object({ ok: z.boolean(), count: z.number() });
    const result = await client.request("GET", "/status", { schema });
    expect(result.data).toEqual({ ok: true, count: 3 });
    const typed: { ok: boolean; count: number } = result.data;
    expect(typed.count).toBe(3);
  });

  it("a 2xx body that does not match the schema is a ServiceError about an unexpected response", async () => {
    responder = (_req, res) => reply(res, 200, { ok: "yes" });
    const client = createServiceClient({ baseUrl: base, retries: 3, sleep: noSleep });
    const error = await catchError(
      client.request("GET", "/status", { schema: z.object({ ok: z.boolean(), count: z.number() }) }),
    );
    expect(error.message).toContain("unexpected response");
    expect(error.message).toContain("ok");
    expect(error.message).toContain("count");
    expect(error.status).toBe(200);
    expect(error.body).toEqual({ ok: "yes" });
    expect(seen).toHaveLength(1);
  });

  it("a 400 becomes a ServiceError with the status and the server's message, and is not retried", async () => {
    responder = (_req, res) => reply(res, 400, { error: "bad thing" });
    const sleeps: number[] = [];
    const client = createServiceClient({
      baseUrl: base,
      retries: 3,
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    });
    const error = await catchError(client.request("POST", "/do", { body: {} }));
    expect(error.status).toBe(400);
    expect(error.message).toContain("bad thing");
    expect(error.message).toContain("400");
    expect(error.body).toEqual({ error: "bad thing" });
    expect(seen).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it("a 404 with a text body reports the text and is not retried", async () => {
    responder = (_req, res) => {
      res.writeHead(404, { "Content-Type": "text/plain" });
      res.end("no such thing");
    };
    const client = createServiceClient({ baseUrl: base, retries: 2, sleep: noSleep });
    const error = await catchError(client.request("GET", "/missing"));
    expect(error.status).toBe(404);
    expect(error.message).toContain("no such thing");
    expect(seen).toHaveLength(1);
  });

  it("retries a 503 with doubling backoff and succeeds when the server recovers", async () => {
    responder = (_req, res, attempt) =>
      attempt < 3 ? reply(res, 503, { error: "warming up" }) : reply(res, 200, { ok: true });
    const sleeps: number[] = [];
    const client = createServiceClient({
      baseUrl: base,
      retries: 2,
      backoffMs: 10,
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    });
    const result = await client.request("PUT", "/flaky", { body: { n: 1 } });
    expect(result).toEqual({ status: 200, data: { ok: true } });
    expect(seen).toHaveLength(3);
    expect(seen.every((s) => s.body === '{"n":1}')).toBe(true);
    expect(sleeps).toEqual([10, 20]);
  });

  it("sends a POST once unless the call opts in to retries: it may have had its effect", async () => {
    responder = (_req, res, attempt) =>
      attempt < 2 ? reply(res, 503, { error: "busy" }) : reply(res, 200, { ok: true });
    const client = createServiceClient({ baseUrl: base, retries: 3, sleep: noSleep });
    const error = await catchError(client.request("POST", "/act", { body: {} }));
    expect(error.status).toBe(503);
    expect(seen).toHaveLength(1);
    const again = await client.request("POST", "/act", { body: {}, retries: 2 });
    expect(again.data).toEqual({ ok: true });
    expect(seen).toHaveLength(2);
  });

  it("sends extra headers", async () => {
    responder = (req, res) => reply(res, 200, { prefer: req.headers.prefer });
    const client = createServiceClient({ baseUrl: base });
    const result = await client.request("POST", "/x", { body: {}, headers: { Prefer: "respond-async" } });
    expect(result.data).toEqual({ prefer: "respond-async" });
  });

  it("retries 429 too, and gives up after retries+1 attempts with the last status", async () => {
    responder = (_req, res) => reply(res, 429, { error: "slow down" });
    const client = createServiceClient({ baseUrl: base, retries: 2, backoffMs: 1 });
    const error = await catchError(client.request("GET", "/limited"));
    expect(error.status).toBe(429);
    expect(error.message).toContain("slow down");
    expect(seen).toHaveLength(3);
  });

  it("a per-request retries option overrides the client's", async () => {
    responder = (_req, res) => reply(res, 500, { error: "broken" });
    const client = createServiceClient({ baseUrl: base, retries: 5, sleep: noSleep });
    const error = await catchError(client.request("GET", "/x", { retries: 0 }));
    expect(error.status).toBe(500);
    expect(error.message).toContain("broken");
    expect(seen).toHaveLength(1);
  });

  it("an unreachable service is a ServiceError 'unreachable' after retries+1 attempts", async () => {
    const port = await freePort();
    let sleeps = 0;
    const client = createServiceClient({
      baseUrl: `http://127.0.0.1:${port}`,
      retries: 2,
      sleep: async () => {
        sleeps++;
      },
    });
    const error = await catchError(client.request("GET", "/health"));
    expect(error.message).toContain("unreachable");
    expect(error.message).toContain(`127.0.0.1:${port}/health`);
    expect(error.status).toBeUndefined();
    // One sleep between each pair of attempts: 3 attempts.
    expect(sleeps).toBe(2);
  });

  it("times out an attempt that never gets an answer", async () => {
    const hung: ServerResponse[] = [];
    responder = (_req, res) => {
      hung.push(res);
    };
    const client = createServiceClient({ baseUrl: base, timeoutMs: 100, retries: 0 });
    const started = Date.now();
    const error = await catchError(client.request("GET", "/hang"));
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(90);
    expect(elapsed).toBeLessThan(5_000);
    expect(error.status).toBeUndefined();
    expect(error.message).toMatch(/unreachable/);
    expect(seen).toHaveLength(1);
    for (const res of hung) res.destroy();
  });

  it("an aborted caller signal is rethrown as-is and not retried", async () => {
    responder = () => {};
    const controller = new AbortController();
    const client = createServiceClient({ baseUrl: base, retries: 3, sleep: noSleep });
    const pending = client.request("GET", "/hang", { signal: controller.signal });
    await vi.waitFor(() => expect(seen).toHaveLength(1));
    controller.abort(new Error("caller gave up"));
    await expect(pending).rejects.toThrow("caller gave up");
    expect(seen).toHaveLength(1);
  });
});
