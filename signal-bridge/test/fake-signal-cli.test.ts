import { spawn, type ChildProcessByStdio } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { freePort } from "@stavrobot/common/test-support";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

const fakePath = fileURLToPath(new URL("./fake-signal-cli.mjs", import.meta.url));
const account = "+15550001";
const user = "+15550002";

interface SseEvent {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/** Reads a Server-Sent Events response the way a client must: blocks split by a blank line, `:` comments. */
class SseReader {
  comments = 0;
  private buffer = "";
  private readonly decoder = new TextDecoder();
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;

  constructor(response: Response) {
    if (!response.body) throw new Error("no event stream body");
    this.reader = response.body.getReader();
  }

  /** The next event, or undefined when the stream ends (the daemon went away). */
  async next(): Promise<SseEvent | undefined> {
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const event = this.parse(block);
        if (event) return event;
        continue;
      }
      const chunk = await this.reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (chunk.done) return undefined;
      this.buffer += this.decoder.decode(chunk.value, { stream: true });
    }
  }

  /** Resolves once a keep-alive comment has arrived, reading (and keeping) any events before it. */
  async nextComment(): Promise<void> {
    const seen = this.comments;
    while (this.comments === seen) {
      const chunk = await this.reader.read();
      if (chunk.done) throw new Error("stream ended before a keep-alive");
      this.buffer += this.decoder.decode(chunk.value, { stream: true });
      this.countComments();
    }
  }

  cancel(): Promise<void> {
    return this.reader.cancel().catch(() => undefined);
  }

  private countComments(): void {
    const lines = this.buffer.split("\n");
    const complete = lines.slice(0, -1);
    this.comments += complete.filter((line) => line.startsWith(":")).length;
    this.buffer = [...complete.filter((line) => !line.startsWith(":")), lines.at(-1) ?? ""].join("\n");
  }

  private parse(block: string): SseEvent | undefined {
    const fields = {
      id: undefined as string | undefined,
      event: undefined as string | undefined,
      data: [] as string[],
    };
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) {
        this.comments++;
        continue;
      }
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (name === "id") fields.id = value;
      else if (name === "event") fields.event = value;
      else if (name === "data") fields.data.push(value);
    }
    return fields.data.length > 0
      ? { id: fields.id, event: fields.event, data: fields.data.join("\n") }
      : undefined;
  }
}

describe("fake signal-cli daemon", () => {
  const root = mkdtempSync(join(tmpdir(), "fake-signal-cli-"));
  const configDir = join(root, "signal-cli");
  const stateFile = join(root, "sends.json");
  let child: ChildProcessByStdio<null, null, Readable>;
  let exited: Promise<number | null>;
  let stderr = "";
  let base = "";
  let rpcId = 0;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const args = ["--config", configDir, "-a", account, "--trust-new-identities", "always", "-o", "json"];
    args.push("daemon", "--http", `127.0.0.1:${port}`, "--receive-mode", "on-start", "--send-read-receipts");
    const env = { ...process.env, FAKE_SIGNAL_STATE: stateFile, FAKE_SIGNAL_KEEPALIVE_MS: "100" };
    child = spawn(fakePath, args, { env, stdio: ["ignore", "ignore", "pipe"] });
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
    await vi.waitFor(() => expect(stderr).toContain("Started HTTP server"), 20_000);
  });

  afterAll(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    rmSync(root, { recursive: true, force: true });
  });

  async function rpc(method: string, params?: unknown): Promise<Record<string, unknown>> {
    const id = ++rpcId;
    const response = await fetch(`${base}/api/v1/rpc`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", method, params, id }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ jsonrpc: "2.0", id });
    return body;
  }

  async function control(path: string, body?: unknown): Promise<Record<string, unknown>> {
    const response = await fetch(`${base}${path}`, {
      method: body === undefined ? "GET" : "POST",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    return (await response.json()) as Record<string, unknown>;
  }

  async function openEvents(headers: Record<string, string> = {}): Promise<SseReader> {
    const response = await fetch(`${base}/api/v1/events`, { headers });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    return new SseReader(response);
  }

  it("answers the health check like the daemon", async () => {
    expect(stderr).toContain(`Started HTTP server on /127.0.0.1:`);
    const check = await fetch(`${base}/api/v1/check`);
    expect(check.status).toBe(200);
    expect(await check.text()).toBe("");
    expect((await fetch(`${base}/api/v1/check`, { method: "POST" })).status).toBe(405);
    expect((await fetch(`${base}/api/v1/nothing`)).status).toBe(404);
    expect(await rpc("version")).toMatchObject({ result: { version: expect.any(String) } });
  });

  it("streams an inbound message as a receive event and stores its attachment like signal-cli", async () => {
    const events = await openEvents();
    await events.nextComment();
    const photo = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]);
    const textStyles = [{ start: 3, length: 5, style: "BOLD" }];
    await control("/test/inbound", {
      source: user,
      message: "hi there",
      textStyles,
      attachments: [{ filename: "photo.jpg", contentType: "image/jpeg", data: photo.toString("base64") }],
    });
    const event = await events.next();
    expect(event?.event).toBe("receive");
    expect(event?.id).toMatch(/^\d+-1$/);
    const payload = JSON.parse(event?.data ?? "{}") as {
      account: string;
      envelope: { source: string; sourceNumber: string; dataMessage: Record<string, unknown> };
    };
    expect(payload.account).toBe(account);
    expect(payload.envelope).toMatchObject({
      source: user,
      sourceNumber: user,
      sourceUuid: expect.any(String),
    });
    const attachment = {
      contentType: "image/jpeg",
      filename: "photo.jpg",
      id: expect.stringMatching(/\.jpg$/),
    };
    expect(payload.envelope.dataMessage).toMatchObject({
      message: "hi there",
      textStyles,
      attachments: [{ ...attachment, size: photo.length }],
    });
    const [stored] = payload.envelope.dataMessage.attachments as { id: string }[];
    expect(readFileSync(join(configDir, "attachments", stored?.id ?? "missing"))).toEqual(photo);

    await control("/test/inbound", {
      source: user,
      voiceNote: true,
      attachments: [{ contentType: "audio/aac", data: Buffer.from("voice").toString("base64") }],
    });
    const voice = JSON.parse((await events.next())?.data ?? "{}") as {
      envelope: { dataMessage: { message: unknown; attachments: { filename: unknown; id: string }[] } };
    };
    expect(voice.envelope.dataMessage.message).toBeNull();
    expect(voice.envelope.dataMessage.attachments[0]).toMatchObject({
      filename: null,
      id: expect.stringMatching(/\.aac$/),
    });
    await events.cancel();

    const replay = await openEvents({ "Last-Event-ID": event?.id ?? "" });
    expect((await replay.next())?.data).toContain('"audio/aac"');
    await replay.cancel();
  });

  it("records a send with its text styles and the attachment bytes as they were at call time", async () => {
    const file = join(root, "report.txt");
    writeFileSync(file, "original bytes");
    const answer = await rpc("send", {
      recipient: [user],
      message: "hello world",
      textStyle: ["0:5:BOLD", "6:5:ITALIC"],
      attachments: [file],
    });
    expect(answer.result).toMatchObject({
      timestamp: expect.any(Number),
      results: [{ recipientAddress: { number: user, uuid: expect.any(String) }, type: "SUCCESS" }],
    });
    writeFileSync(file, "changed later");
    const sent = (await control("/test/sent")) as unknown as Record<string, unknown>[];
    expect(sent.at(-1)).toMatchObject({
      recipients: [user],
      message: "hello world",
      textStyles: ["0:5:BOLD", "6:5:ITALIC"],
      attachments: [
        { path: file, filename: "report.txt", data: Buffer.from("original bytes").toString("base64") },
      ],
    });
  });

  it("rejects what signal-cli rejects", async () => {
    const wrongType = await fetch(`${base}/api/v1/rpc`, { method: "POST", body: "{}" });
    expect(wrongType.status).toBe(415);
    expect(await rpc("listEverything")).toMatchObject({ error: { code: -32601 } });
    expect(await rpc("send", { recipient: [user], message: "x", textStyle: ["0:1:LOUD"] })).toMatchObject({
      error: { code: -1, message: "Invalid style: LOUD" },
    });
    expect(
      await rpc("send", { recipient: [user], message: "x", attachment: join(root, "missing.bin") }),
    ).toMatchObject({ error: { code: -32603 } });
  });

  it("fails the next send with a rate-limit challenge, then accepts the solved captcha", async () => {
    const armed = await control("/test/rate-limit", {});
    const failed = await rpc("send", { recipient: user, message: "too many" });
    expect(failed.error).toMatchObject({
      code: -5,
      message: "Failed to send message due to rate limiting",
      data: {
        response: {
          results: [
            {
              recipientAddress: { number: user },
              type: "RATE_LIMIT_FAILURE",
              token: armed.token,
              retryAfterSeconds: 86_400,
            },
          ],
        },
      },
    });
    expect(await rpc("send", { recipient: user, message: "later" })).toHaveProperty("result");
    expect(await rpc("submitRateLimitChallenge", { challenge: "wrong", captcha: "c" })).toMatchObject({
      error: { code: -1 },
    });
    const solved = await rpc("submitRateLimitChallenge", {
      challenge: armed.token,
      captcha: "signalcaptcha://t",
    });
    expect(solved.result).toEqual({});
    expect(await control("/test/challenges")).toContainEqual({
      challenge: armed.token,
      captcha: "signalcaptcha://t",
    });
  });

  it("fails the next send with a plain error when told to", async () => {
    await control("/test/fail-send", {});
    const failed = await rpc("send", { recipient: [user], message: "lost" });
    expect(failed.error).toMatchObject({ code: -1, message: "Failed to send message" });
    const sent = (await control("/test/sent")) as unknown as { message: string }[];
    expect(sent.map((send) => send.message)).not.toContain("lost");
  });

  it("exits with the requested code, cutting the event stream, and keeps sends in the state file", async () => {
    const events = await openEvents();
    await control("/test/exit", { code: 3 });
    expect(await events.next()).toBeUndefined();
    expect(await exited).toBe(3);
    const recorded = JSON.parse(readFileSync(stateFile, "utf8")) as { message: string }[];
    expect(recorded.map((send) => send.message)).toEqual(["hello world", "later"]);
  });

  it("refuses a command line it cannot honour", async () => {
    const bad = spawn(fakePath, ["-a", account, "send", "-m", "hi"], { stdio: ["ignore", "ignore", "pipe"] });
    let output = "";
    bad.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => bad.once("exit", resolve));
    expect(code).toBe(1);
    expect(output).toContain("daemon");
  });
});
