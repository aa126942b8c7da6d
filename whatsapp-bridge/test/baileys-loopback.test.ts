import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { closeServer, createLogger } from "@stavrobot/common";
import { baileysSockets } from "../src/baileys-socket.js";
import { WhatsAppConnection } from "../src/connection.js";

const WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/**
 * A loopback server standing in for WhatsApp's: it completes the WebSocket handshake, then
 * closes the connection (`accept-and-drop`) or says nothing more (`accept-and-say-nothing`); or
 * answers the upgrade with HTTP 405 (`refuse-405`).
 */
async function startLoopback(mode: "accept-and-drop" | "accept-and-say-nothing" | "refuse-405"): Promise<{
  url: string;
  upgrades: number;
  server: Server;
  close(): Promise<void>;
}> {
  const state = { upgrades: 0 };
  const server = createServer((_req, res) => res.writeHead(404).end());
  const sockets = new Set<Duplex>();
  server.on("upgrade", (req, socket) => {
    state.upgrades += 1;
    sockets.add(socket);
    if (mode === "refuse-405") {
      socket.end("HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;
    }
    const key = String(req.headers["sec-websocket-key"]);
    const accept = createHash("sha1")
      .update(key + WEBSOCKET_GUID)
      .digest("base64");
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    // A close frame (1000), then the end of the connection; or nothing at all.
    if (mode === "accept-and-drop") socket.end(Buffer.from([0x88, 0x02, 0x03, 0xe8]));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/ws/chat`,
    server,
    async close() {
      for (const socket of sockets) socket.destroy();
      await closeServer(server);
    },
    get upgrades() {
      return state.upgrades;
    },
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function connectTo(url: string): Promise<{ connection: WhatsAppConnection; logs: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), "whatsapp-loopback-"));
  const logs: string[] = [];
  const logger = createLogger("whatsapp-bridge", "debug", (line) => logs.push(line));
  const sockets = baileysSockets(join(dir, "auth"), { version: undefined, logger, url });
  const connection = new WhatsAppConnection({
    ...sockets,
    onMessages: () => undefined,
    logger,
    // One attempt per test: the retry waits longer than the test.
    tuning: { backoffBaseMs: 10 * 60_000, watchdogIntervalMs: 100, connectTimeoutMs: 2_000 },
  });
  cleanups.push(async () => {
    await connection.stop();
    await rm(dir, { recursive: true, force: true });
  });
  return { connection, logs };
}

describe("the real Baileys against a loopback WebSocket server", () => {
  it("a server that accepts and drops is a closed connection: failing, retried, its code recorded", async () => {
    const loopback = await startLoopback("accept-and-drop");
    cleanups.push(() => loopback.close());
    const { connection, logs } = await connectTo(loopback.url);
    await connection.link({ method: "qr" });
    await vi.waitFor(() => expect(connection.current).toBe("failing"), { timeout: 15_000 });
    expect(loopback.upgrades).toBe(1);
    expect(connection.health()).toMatchObject({
      whatsapp: "failing",
      lastError: expect.stringMatching(/^428: /),
      problem: expect.stringContaining("retrying in 300 s, forever"),
    });
    // Baileys printed nothing of its own: every line is the bridge's.
    expect(logs.every((line) => line.includes("[whatsapp-bridge]"))).toBe(true);
  });

  it("a server that takes the connection and says nothing is given up as failing, not waited on forever", async () => {
    const loopback = await startLoopback("accept-and-say-nothing");
    cleanups.push(() => loopback.close());
    const { connection } = await connectTo(loopback.url);
    await connection.link({ method: "qr" });
    await vi.waitFor(() => expect(connection.current).toBe("failing"), { timeout: 15_000 });
    expect(loopback.upgrades).toBe(1);
    expect(connection.health().lastError).toMatch(/^WhatsApp did not answer within \d+ s$/);
  });

  it("a 405 in place of the WebSocket upgrade is outdated, naming the setting, not failing", async () => {
    const loopback = await startLoopback("refuse-405");
    cleanups.push(() => loopback.close());
    const { connection } = await connectTo(loopback.url);
    await connection.link({ method: "qr" });
    await vi.waitFor(() => expect(connection.current).not.toBe("connecting"), { timeout: 15_000 });
    expect(loopback.upgrades).toBe(1);
    expect(connection.health()).toMatchObject({
      whatsapp: "outdated",
      problem: expect.stringContaining("Set [whatsapp] version in config.toml"),
      lastError: "405: WhatsApp refused the WebSocket handshake (HTTP 405)",
    });
  });
});
