import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { HttpError, createLogger } from "@stavrobot/common";
import { CLOSE, WhatsAppConnection } from "../src/connection.js";
import { FakeSockets } from "./fake-socket.js";

/** Lets the connection's promise chains run (fake timers do not run them). */
const settle = () => vi.advanceTimersByTimeAsync(0);

function setup(options: { session?: boolean } = {}) {
  const fake = new FakeSockets();
  fake.session = options.session ?? true;
  const logs: string[] = [];
  const received: unknown[][] = [];
  const states: string[] = [];
  const connection = new WhatsAppConnection({
    ...fake.parts(),
    onMessages: (_socket, messages) => received.push([...messages]),
    onState: (status) => states.push(status.whatsapp),
    logger: createLogger("whatsapp-bridge", "debug", (line) => logs.push(line)),
    tuning: {
      backoffBaseMs: 1_000,
      backoffMaxMs: 8_000,
      watchdogSilentMs: 60_000,
      watchdogIntervalMs: 10_000,
    },
  });
  return { fake, logs, received, states, connection };
}

describe("the WhatsApp connection", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("waits unlinked without a session, and answers 503 to a send", async () => {
    const { fake, connection } = setup({ session: false });
    await connection.start();
    expect(fake.sockets).toHaveLength(0);
    expect(connection.health()).toMatchObject({ whatsapp: "unlinked" });
    expect(() => connection.openSocket()).toThrow(HttpError);
    try {
      connection.openSocket();
    } catch (error) {
      expect((error as HttpError).status).toBe(503);
      expect((error as HttpError).message).toMatch(/^WhatsApp is unlinked: Not linked yet/);
    }
    await connection.stop();
  });

  it("connects with a session, and is open with the account's number", async () => {
    const { fake, connection } = setup();
    await connection.start();
    expect(connection.current).toBe("connecting");
    fake.last.open();
    await settle();
    expect(connection.health()).toEqual({ whatsapp: "open", account: "+15550009999" });
    expect(connection.openSocket()).toBeDefined();
    await connection.stop();
  });

  it("links with a QR code that rotates, then reconnects at once when WhatsApp asks for a restart", async () => {
    const { fake, connection } = setup({ session: false });
    await connection.start();
    await connection.link({ method: "qr" });
    fake.last.qr("first-qr");
    await settle();
    expect(connection.linkStatus()).toMatchObject({ whatsapp: "qr", qr: "first-qr" });
    // The QR code never reaches the open health route.
    expect(connection.health()).not.toHaveProperty("qr");
    fake.last.qr("second-qr");
    await settle();
    expect(connection.linkStatus().qr).toBe("second-qr");
    fake.last.close(CLOSE.restartRequired, "restart required");
    await settle();
    expect(fake.sockets).toHaveLength(2);
    expect(connection.current).toBe("connecting");
    fake.last.open();
    await settle();
    expect(connection.current).toBe("open");
    await connection.stop();
  });

  it("links with a pairing code for a number, asked once per socket", async () => {
    const { fake, connection } = setup({ session: false });
    await connection.start();
    await connection.link({ method: "code", phoneNumber: "+15550001234" });
    fake.last.qr("ready");
    await settle();
    fake.last.qr("ready-again");
    await settle();
    expect(fake.last.pairingRequests).toEqual(["15550001234"]);
    expect(connection.linkStatus()).toMatchObject({ whatsapp: "code", code: "ABCD-EFGH" });
    expect(connection.linkStatus()).not.toHaveProperty("qr");
    await connection.stop();
  });

  it("goes back to unlinked when linking times out, instead of retrying forever", async () => {
    const { fake, connection } = setup({ session: false });
    await connection.start();
    await connection.link({ method: "qr" });
    fake.last.qr("qr");
    await settle();
    fake.last.close(CLOSE.connectionLost, "QR refs attempts ended");
    await settle();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(connection.health()).toMatchObject({
      whatsapp: "unlinked",
      problem: expect.stringContaining("Linking timed out"),
      lastError: "408: QR refs attempts ended",
    });
    expect(fake.sockets).toHaveLength(1);
    await connection.stop();
  });

  it("refuses to link while open", async () => {
    const { fake, connection } = setup();
    await connection.start();
    fake.last.open();
    await settle();
    await expect(connection.link({ method: "qr" })).rejects.toMatchObject({ status: 409 });
    await connection.stop();
  });

  it("is loggedOut and forgets the session when the phone logs the device out", async () => {
    const { fake, connection } = setup();
    await connection.start();
    fake.last.open();
    await settle();
    fake.last.close(CLOSE.loggedOut, "Connection Failure");
    await settle();
    await vi.advanceTimersByTimeAsync(600_000);
    expect(connection.health()).toMatchObject({
      whatsapp: "loggedOut",
      problem: expect.stringContaining("link it again"),
      lastError: "401: Connection Failure",
    });
    expect(fake.session).toBe(false);
    expect(fake.sockets).toHaveLength(1);
    await connection.stop();
  });

  it("stops and says so when another session replaces it", async () => {
    const { fake, connection } = setup();
    await connection.start();
    fake.last.open();
    await settle();
    fake.last.close(CLOSE.connectionReplaced, "Connection Replaced");
    await settle();
    await vi.advanceTimersByTimeAsync(600_000);
    expect(connection.health()).toMatchObject({
      whatsapp: "replaced",
      problem: expect.stringContaining("replaced"),
    });
    expect(fake.sockets).toHaveLength(1);
    await connection.stop();
  });

  it("says an outdated version is refused, names the setting, and keeps retrying", async () => {
    const { fake, connection } = setup();
    await connection.start();
    fake.last.close(CLOSE.outdated, "Connection Failure");
    await settle();
    expect(connection.health()).toMatchObject({
      whatsapp: "outdated",
      problem: expect.stringContaining("[whatsapp] version"),
    });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(fake.sockets).toHaveLength(2);
    await connection.stop();
  });

  it("a 405 while linking is outdated too, not a link that timed out", async () => {
    const { fake, connection } = setup({ session: false });
    await connection.start();
    await connection.link({ method: "qr" });
    fake.last.qr("qr-1");
    await settle();
    expect(connection.current).toBe("qr");
    fake.last.close(CLOSE.outdated, "Connection Failure");
    await settle();
    expect(connection.linkStatus()).toEqual({
      whatsapp: "outdated",
      problem: expect.stringContaining("[whatsapp] version"),
      lastError: "405: Connection Failure",
      lastErrorAt: expect.any(String),
    });
    await connection.stop();
  });

  it("retries anything else with backoff doubling up to its cap, forever, failing until open", async () => {
    const { fake, logs, connection } = setup();
    await connection.start();
    const delays: number[] = [];
    for (let attempt = 0; attempt < 7; attempt += 1) {
      fake.last.close(503, "Stream Errored");
      await settle();
      expect(connection.current).toBe("failing");
      const line = logs.filter((entry) => entry.includes("reconnecting later")).at(-1) ?? "";
      delays.push(Number(/"delayMs":(\d+)/.exec(line)?.[1]));
      const before = fake.sockets.length;
      await vi.advanceTimersByTimeAsync(delays.at(-1)! - 1);
      expect(fake.sockets).toHaveLength(before);
      await vi.advanceTimersByTimeAsync(1);
      expect(fake.sockets).toHaveLength(before + 1);
    }
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 8_000, 8_000, 8_000]);
    expect(connection.health()).toMatchObject({ whatsapp: "failing", lastError: "503: Stream Errored" });
    fake.last.open();
    await settle();
    expect(connection.current).toBe("open");
    // Open again: the next failure starts from the first wait.
    fake.last.close(500, "bad session");
    await settle();
    expect(logs.filter((entry) => entry.includes("reconnecting later")).at(-1)).toContain('"delayMs":1000');
    await connection.stop();
  });

  it("retries when the socket cannot even be made", async () => {
    const { fake, connection } = setup();
    fake.openError = "no network";
    await connection.start();
    await settle();
    expect(connection.health()).toMatchObject({
      whatsapp: "failing",
      lastError: "could not open the socket: no network",
    });
    fake.openError = undefined;
    await vi.advanceTimersByTimeAsync(1_000);
    fake.last.open();
    await settle();
    expect(connection.current).toBe("open");
    await connection.stop();
  });

  it("reopens a socket that says it is open but has gone silent", async () => {
    const { fake, connection } = setup();
    await connection.start();
    fake.last.open();
    await settle();
    // Activity keeps it alive past the silence limit.
    for (let step = 0; step < 10; step += 1) {
      await vi.advanceTimersByTimeAsync(10_000);
      fake.last.activity();
    }
    expect(fake.sockets).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(70_000);
    expect(fake.sockets).toHaveLength(2);
    expect(fake.sockets[0]!.ended).toBe(true);
    expect(connection.current).toBe("connecting");
    expect(connection.health().lastError).toMatch(/^the open socket was silent for \d+ s; reopened it$/);
    fake.last.open();
    await settle();
    expect(connection.current).toBe("open");
    await connection.stop();
  });

  it("gives up on a socket that never opens, and retries it as failing", async () => {
    const { fake, connection } = setup();
    await connection.start();
    expect(connection.current).toBe("connecting");
    // The default limit is 90 s, checked every 10 s here.
    await vi.advanceTimersByTimeAsync(100_000);
    expect(connection.health()).toMatchObject({
      whatsapp: "failing",
      lastError: expect.stringMatching(/^WhatsApp did not answer within \d+ s$/),
    });
    expect(fake.sockets[0]!.ended).toBe(true);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(fake.sockets).toHaveLength(2);
    await connection.stop();
  });

  it("ignores what an ended socket still reports", async () => {
    const { fake, connection } = setup();
    await connection.start();
    const first = fake.last;
    first.close(CLOSE.restartRequired);
    await settle();
    first.close(CLOSE.loggedOut);
    await settle();
    expect(connection.current).toBe("connecting");
    await connection.stop();
  });

  it("unlinks: logs out, forgets the session, and is unlinked", async () => {
    const { fake, connection } = setup();
    await connection.start();
    fake.last.open();
    await settle();
    await connection.unlink();
    expect(fake.last.loggedOut).toBe(true);
    expect(fake.last.ended).toBe(true);
    expect(fake.session).toBe(false);
    expect(connection.health()).toMatchObject({ whatsapp: "unlinked" });
    await connection.stop();
  });
});
