import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Server } from "node:http";
import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { HttpError } from "../errors.js";
import { silentLogger } from "../logger.js";
import { checkBearer } from "./auth.js";
import { readBody, readJsonObject } from "./body.js";
import { Router } from "./router.js";
import { closeServer, createHttpServer, createRequestListener, listen } from "./serve.js";

const SECRET = "limits-test-secret";

/** A raw socket, so a test can trickle a body and watch exactly when the server hangs up. */
function rawClient(port: number): Promise<{ socket: Socket; data: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let data = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (data += chunk));
    socket.on("error", () => {});
    const closed = new Promise<void>((done) => socket.once("close", () => done()));
    socket.once("connect", () => resolve({ socket, data: () => data, closed }));
    socket.once("error", reject);
  });
}

/** Writes one byte every 50 ms until the socket closes; resolves with how many were written. */
async function trickle(socket: Socket, max: number): Promise<number> {
  let sent = 0;
  while (sent < max && !socket.destroyed && socket.writable) {
    socket.write("x");
    sent++;
    await sleep(50);
  }
  return sent;
}

describe("createHttpServer and early answers", () => {
  let server: Server;
  let port: number;

  beforeAll(async () => {
    const router = new Router()
      .post("/echo", async ({ req }) => ({ json: { bytes: (await readBody(req, 1_000_000)).length } }))
      .post("/json", async ({ req }) => ({ json: await readJsonObject(req, 1_000_000) }))
      .post("/slow", async ({ req }) => {
        await readBody(req, 1_000);
        await sleep(1_500);
        return { json: { slow: true } };
      });
    const listener = createRequestListener(router, {
      logger: silentLogger,
      guard: ({ req }) => {
        if (!checkBearer(req.headers.authorization, SECRET)) throw new HttpError(401, "Unauthorized");
      },
    });
    server = createHttpServer(listener, { requestTimeoutMs: 600, headersTimeoutMs: 600, maxConnections: 3 });
    port = await listen(server, 0);
  });

  afterAll(() => closeServer(server));

  it("hangs up on a client still trickling a body after it was refused with 401", async () => {
    const client = await rawClient(port);
    client.socket.write(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
    );
    const sent = await trickle(client.socket, 200);
    await client.closed;
    expect(client.data()).toMatch(/^HTTP\/1\.1 401/);
    expect(client.data().toLowerCase()).toContain("connection: close");
    // 200 bytes would take 10 s; the server hung up long before.
    expect(sent).toBeLessThan(100);
  });

  it("answers 408 and closes when an authenticated body arrives too slowly", async () => {
    const client = await rawClient(port);
    client.socket.write(
      `POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${SECRET}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`,
    );
    const sent = await trickle(client.socket, 200);
    await client.closed;
    expect(client.data()).toMatch(/^HTTP\/1\.1 408/);
    expect(sent).toBeLessThan(100);
  });

  it("lets a handler take longer than the request timeout once the request was read", async () => {
    const response = await fetch(`http://127.0.0.1:${port}/slow`, {
      method: "POST",
      headers: { Authorization: `Bearer ${SECRET}`, "Content-Type": "application/json" },
      body: "{}",
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ slow: true });
  });

  it("refuses connections beyond the cap", async () => {
    const held = await Promise.all([rawClient(port), rawClient(port), rawClient(port)]);
    const extra = await rawClient(port);
    await extra.closed;
    expect(extra.data()).toBe("");
    for (const client of held) client.socket.destroy();
  });

  it("refuses a body that is not declared JSON with 415, and accepts JSON with a charset", async () => {
    const post = (type: string | undefined, body: string) =>
      fetch(`http://127.0.0.1:${port}/json`, {
        method: "POST",
        headers: { Authorization: `Bearer ${SECRET}`, ...(type ? { "Content-Type": type } : {}) },
        body,
      });
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
    ]) {
      const refused = await post(type, '{"message":"hi"}');
      expect(refused.status).toBe(415);
      expect(((await refused.json()) as { error: string }).error).toMatch(/Unsupported Content-Type/);
    }
    const plainBlob = await fetch(`http://127.0.0.1:${port}/json`, {
      method: "POST",
      headers: { Authorization: `Bearer ${SECRET}` },
      body: new Blob(['{"a":1}']),
    });
    expect(plainBlob.status).toBe(415);
    const ok = await post("application/json; charset=utf-8", '{"a":1}');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ a: 1 });
  });
});
