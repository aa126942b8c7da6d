import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Json, TestBridge } from "./helpers.js";
import {
  FAKE_SIGNAL_CLI,
  SECRET,
  startFakeApp,
  startListeningBridge,
  startTestBridge,
  waitUntilListening,
} from "./helpers.js";

const bob = "+447700900123";

describe("sending through signal-cli", () => {
  let bridge: TestBridge;
  let stop: () => Promise<void>;
  beforeAll(async () => ({ bridge, stop } = await startListeningBridge()));
  afterAll(() => stop());

  async function lastSent(): Promise<Json> {
    return ((await bridge.control("/test/sent")) as Json[]).at(-1);
  }

  it("converts Markdown to text and UTF-16 style ranges, past emoji and Greek", async () => {
    const answer = await bridge.request("POST", "/send", {
      recipient: bob,
      message: "😀 Καλημέρα **φίλε** and _you_ 👋🏽",
    });
    expect(answer).toEqual({ status: 200, body: { ok: true, timestamp: expect.any(Number) } });
    const sent = await lastSent();
    expect(sent).toMatchObject({
      recipients: [bob],
      message: "😀 Καλημέρα φίλε and you 👋🏽",
      textStyles: ["12:4:BOLD", "21:3:ITALIC"],
      attachments: [],
      timestamp: answer.body.timestamp,
    });
    // Read back the way Signal does: the ranges cover exactly the styled words.
    expect(sent.message.slice(12, 16)).toBe("φίλε");
    expect(sent.message.slice(21, 24)).toBe("you");
  });

  it("sends an attachment from a private temporary file with the converted message, then deletes it", async () => {
    const bytes = Buffer.from("%PDF-1.7 the quarterly report");
    const answer = await bridge.request("POST", "/send", {
      recipient: bob,
      message: "**Report** attached",
      attachment: bytes.toString("base64"),
      attachmentFilename: "../../etc/report.pdf",
    });
    expect(answer.status).toBe(200);
    const sent = await lastSent();
    expect(sent).toMatchObject({ message: "Report attached", textStyles: ["0:6:BOLD"] });
    expect(sent.attachments).toHaveLength(1);
    const [attachment] = sent.attachments;
    expect(attachment).toMatchObject({ filename: "report.pdf", data: bytes.toString("base64") });
    const tempDir = join(bridge.config.stateDir, "tmp");
    expect(attachment.path.startsWith(tempDir + "/")).toBe(true);
    expect(existsSync(attachment.path)).toBe(false);
    expect(readdirSync(tempDir)).toEqual([]);

    const bare = await bridge.request("POST", "/send", {
      recipient: bob,
      attachment: bytes.toString("base64"),
    });
    expect(bare.status).toBe(200);
    expect(await lastSent()).toMatchObject({ message: "", attachments: [{ filename: "attachment.bin" }] });
  });

  it("answers a rate limit with 429 and the wait, then passes the solved captcha with the kept token", async () => {
    expect(await bridge.request("POST", "/challenge", { captcha: "signalcaptcha://early" })).toEqual({
      status: 400,
      body: { error: "No rate-limit challenge is pending", kind: "invalid" },
    });
    const armed = await bridge.control("/test/rate-limit", {
      token: "challenge-token-1",
      retryAfterSeconds: 3600,
    });
    const refused = await fetch(`${bridge.url}/send`, {
      method: "POST",
      headers: { Authorization: `Bearer ${SECRET}`, "Content-Type": "application/json" },
      body: JSON.stringify({ recipient: bob, message: "too many" }),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("3600");
    expect(await refused.json()).toEqual({
      error: "rate_limited",
      kind: "rate-limited",
      retryAfterSeconds: 3600,
      challengeToken: armed.token,
    });
    const solved = await bridge.request("POST", "/challenge", { captcha: "signalcaptcha://solved" });
    expect(solved).toEqual({ status: 200, body: { ok: true } });
    expect(await bridge.control("/test/challenges")).toContainEqual({
      challenge: "challenge-token-1",
      captcha: "signalcaptcha://solved",
    });
    // The token is used up.
    expect((await bridge.request("POST", "/challenge", { captcha: "signalcaptcha://again" })).status).toBe(
      400,
    );
  });

  it("answers 502 when signal-cli refuses, keeping the challenge for another try", async () => {
    await bridge.control("/test/rate-limit", { token: "challenge-token-2" });
    expect((await bridge.request("POST", "/send", { recipient: bob, message: "x" })).status).toBe(429);
    // Someone else used the challenge up: signal-cli rejects the captcha.
    await fetch(`${bridge.fakeUrl}/api/v1/rpc`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "submitRateLimitChallenge",
        params: { challenge: "challenge-token-2", captcha: "c" },
      }),
    });
    const rejected = await bridge.request("POST", "/challenge", { captcha: "signalcaptcha://late" });
    expect(rejected.status).toBe(502);
    expect(rejected.body.error).toMatch(/^signal-cli: Captcha rejected/);
    expect((await bridge.request("POST", "/challenge", { captcha: "signalcaptcha://late" })).status).toBe(
      502,
    );

    await bridge.control("/test/fail-send", {});
    const failed = await bridge.request("POST", "/send", { recipient: bob, message: "lost" });
    expect(failed).toEqual({
      status: 502,
      body: { error: "signal-cli: Failed to send message", kind: "upstream" },
    });
  });

  it("refuses bad requests with 400 (or 415) and sends nothing", async () => {
    const before = ((await bridge.control("/test/sent")) as Json[]).length;
    const bad: unknown[] = [
      { recipient: "0044 7700 900123", message: "hi" },
      { recipient: "+0123", message: "hi" },
      { recipient: bob },
      { recipient: bob, message: "   " },
      { recipient: bob, attachment: "not base64!" },
      { recipient: bob, message: "hi", extra: true },
      "{ not json",
    ];
    for (const body of bad) {
      const answer = await bridge.request("POST", "/send", body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
    }
    const noJson = await fetch(`${bridge.url}/send`, {
      method: "POST",
      headers: { Authorization: `Bearer ${SECRET}`, "Content-Type": "text/plain" },
      body: "hi",
    });
    expect(noJson.status).toBe(415);
    expect((await bridge.request("POST", "/challenge", {})).status).toBe(400);
    expect((await bridge.request("POST", "/challenge", { captcha: "  " })).status).toBe(400);
    expect(((await bridge.control("/test/sent")) as Json[]).length).toBe(before);
  });
});

describe("without a running signal-cli", () => {
  it("says signal-cli is missing and what to do, in /health, in its 503s and once in its log, and starts it once it is installed", async () => {
    const app = await startFakeApp();
    const root = mkdtempSync(join(tmpdir(), "signal-cli-later-"));
    const path = join(root, "bin", "signal-cli");
    const bridge = await startTestBridge({
      appUrl: app.url,
      signalCliPath: path,
      tuning: { restartBaseMs: 50, restartMaxMs: 200 },
    });
    const notFound = (line: string) => line.includes("ENOENT");
    try {
      await vi.waitFor(() => expect(bridge.bridge.daemon.state).toBe("missing"), { timeout: 15_000 });
      const health = (await (await fetch(`${bridge.url}/health`)).json()) as Json;
      expect(health).toEqual({
        status: "ok",
        signalCli: "missing",
        problem: expect.stringContaining(`signal-cli is not installed: "${path}" was not found`),
        account: bridge.config.account,
      });
      expect(health.problem).toContain(
        "Install signal-cli (see signal-bridge/README.md) or set SIGNAL_CLI_PATH",
      );
      const answer = await bridge.request("POST", "/send", { recipient: bob, message: "hello" });
      expect(answer.status).toBe(503);
      expect(answer.body.error).toBe(health.problem);

      // Tried again and again, but said once at error level, with the hint; the rest at debug.
      await vi.waitFor(() => expect(bridge.logs.filter(notFound).length).toBeGreaterThan(4), {
        timeout: 15_000,
      });
      const loud = bridge.logs.filter((line) => notFound(line) && !line.includes(" DEBUG "));
      expect(loud).toHaveLength(1);
      expect(loud[0]).toMatch(/ ERROR .*signal-cli is not installed: .*set SIGNAL_CLI_PATH/);
      expect(bridge.logs.join("\n")).not.toContain("signal-cli exited");

      // Installed: found at the next look, started, and sending works.
      mkdirSync(join(root, "bin"));
      symlinkSync(FAKE_SIGNAL_CLI, path);
      await waitUntilListening(bridge);
      expect(bridge.logs.join("\n")).toContain("signal-cli found; starting it");
      expect(((await (await fetch(`${bridge.url}/health`)).json()) as Json).problem).toBeUndefined();
      const sent = await bridge.request("POST", "/send", { recipient: bob, message: "hello" });
      expect(sent.status).toBe(200);
    } finally {
      await bridge.stop();
      await app.close();
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("says why signal-cli stopped, from its own last complaint", async () => {
    const { bridge, stop } = await startListeningBridge();
    try {
      await bridge.control("/test/exit", {
        code: 3,
        stderr: "ERROR App - User +15550001111 is not registered.",
      });
      await vi.waitFor(() =>
        expect(bridge.bridge.daemon.problem).toMatch(/^signal-cli stopped \(exit code 3\)/),
      );
      expect(bridge.bridge.daemon.problem).toContain("User +15550001111 is not registered.");
    } finally {
      await stop();
    }
  });
});
