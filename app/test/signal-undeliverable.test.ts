import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import {
  freePort,
  startFakeAnthropic,
  textTurn,
  toolTurn,
  type FakeLlmServer,
  type FakeTurn,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { PASSWORD, chat, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { asProcess } from "./helpers/cli.js";
import { openEventStream } from "./helpers/event-stream.js";
import { raw } from "./helpers/http.js";
// The real signal-bridge (its domain behind the service listener) with the fake signal-cli daemon.
import type { Json, TestBridge } from "../../signal-bridge/test/helpers.js";
import {
  ACCOUNT,
  FAKE_SIGNAL_CLI,
  SECRET,
  startTestBridge,
  waitUntilListening,
} from "../../signal-bridge/test/helpers.js";

/**
 * An owner reached on Signal whose messages Signal cannot deliver: signal-cli not installed where
 * the real bridge looks for it (then installed, and removed again), or no bridge at all. A
 * reminder that fires meanwhile is kept for the owner's consoles with the reason (the web's
 * notifications, the next REPL), the home page says what waits and why, and when Signal works
 * again the message goes out there only if no console has shown it yet.
 */
const OWNER = "+15550002222";
const WAIT = { timeout: 30_000, interval: 100 };

interface Listed {
  id: number;
  source: string | null;
  title: string;
  response: string;
}

/**
 * The model: a reminder's firing answers with its text; anything else takes the next scripted
 * turn.
 */
class Script {
  readonly firings = new Map<string, string>();
  readonly turns: FakeTurn[] = [];

  constructor(fake: FakeLlmServer) {
    fake.setResponder((request) => {
      for (const [note, answer] of this.firings) {
        if (request.lastUserText.includes(`has fired] ${note}`)) return textTurn(answer);
      }
      return this.turns.shift() ?? textTurn("(nothing scripted)");
    });
  }

  /**
   * The model sets reminders (note → what its firing answers), due one after another in a moment,
   * in one console turn (a later console reply would show the owner what was kept meanwhile).
   */
  async remind(app: RunningApp, reminders: Record<string, string>): Promise<void> {
    const notes = Object.keys(reminders);
    this.turns.push(
      ...notes.map((note, index) =>
        toolTurn("manage_cron", {
          action: "create",
          note,
          fire_at: new Date(Date.now() + 1_000 + index * 1_000).toISOString(),
        }),
      ),
      textTurn("Scheduled."),
    );
    for (const note of notes) this.firings.set(note, reminders[note] as string);
    expect((await chat(app, `remind me: ${notes.join(", ")}`)).body.response).toBe("Scheduled.");
  }
}

async function listed(app: RunningApp): Promise<Listed[]> {
  return (await raw(app.port, "GET", "/api/notifications")).json.notifications as Listed[];
}

async function pending(app: RunningApp): Promise<unknown[]> {
  return (await raw(app.port, "GET", "/api/answers/pending")).json.answers as unknown[];
}

async function status(app: RunningApp): Promise<Json> {
  return (await raw(app.port, "GET", "/api/status")).json;
}

async function deliveryStatus(app: RunningApp, text: string): Promise<string | undefined> {
  const result = await app.db.query<{ status: string }>(
    "SELECT status FROM deliveries WHERE payload->>'text' = $1",
    [text],
  );
  return result.rows[0]?.status;
}

describe("an owner on Signal while signal-cli is not installed", () => {
  let fake: FakeLlmServer;
  let script: Script;
  let bridge: TestBridge;
  let env: TestEnv;
  let app: RunningApp;
  const root = mkdtempSync(join(tmpdir(), "signal-cli-missing-"));
  /** Where the bridge looks for signal-cli: nothing there until a test installs it. */
  const signalCli = join(root, "bin", "signal-cli");
  const install = () => symlinkSync(FAKE_SIGNAL_CLI, signalCli);
  const sentTo = async (recipient: string): Promise<string[]> =>
    ((await bridge.control("/test/sent")) as Json[])
      .filter((sent) => sent.recipients?.includes(recipient))
      .map((sent) => String(sent.message));

  beforeAll(async () => {
    mkdirSync(join(root, "bin"));
    fake = await startFakeAnthropic();
    script = new Script(fake);
    const internalPort = await freePort();
    bridge = await startTestBridge({
      appUrl: `http://127.0.0.1:${internalPort}`,
      signalCliPath: signalCli,
      tuning: { restartMaxMs: 300 },
    });
    env = await createTestEnv(
      configFor(
        fake,
        "anthropic",
        `[owner]\nname = "Ada"\nsignal = "${OWNER}"\n[signal]\naccount = "${ACCOUNT}"\n`,
      ),
    );
    Object.assign(env.env, {
      INTERNAL_PORT: String(internalPort),
      STAVROBOT_INTERNAL_SECRET: SECRET,
      SIGNAL_BRIDGE_URL: bridge.url,
    });
    app = await startApp({ env: env.env, logger: silentLogger });
  });

  afterAll(async () => {
    await app?.close();
    await bridge?.stop();
    await fake?.close();
    await env?.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  it("keeps its reminders for the web's notifications with the reason, shows them waiting, and sends them on Signal once it works, withdrawing the notifications", async () => {
    await vi.waitFor(() => expect(bridge.bridge.daemon.state).toBe("missing"), WAIT);
    const stream = await openEventStream(`http://127.0.0.1:${app.port}/api/events`, {
      Authorization: basicAuthHeader(PASSWORD),
    });
    await stream.first("ready");
    // The second fires while the first still waits for Signal: it is queued behind it, never tried.
    await script.remind(app, {
      "water the plants": "Time to **water** the plants!",
      "call mum": "Call mum now.",
    });
    const kept = await vi.waitFor(async () => {
      const now = await listed(app);
      expect(now).toHaveLength(2);
      return now;
    }, WAIT);
    expect(kept.map((item) => [item.source, item.title])).toEqual([
      ["delivery", "call mum"],
      ["delivery", "water the plants"],
    ]);
    const water = kept[1] as Listed;
    expect(water.response).toMatch(
      /^Signal could not deliver this to you: signal-cli is not installed: ".*" was not found \(spawn .* ENOENT\)\. Install signal-cli \(see signal-bridge\/README\.md\) or set SIGNAL_CLI_PATH to where it is\.\n\nTime to \*\*water\*\* the plants!\n\n/,
    );
    expect(water.response).toContain("it is not sent on Signal as well");
    // The open pages heard of both; both still wait for Signal.
    expect(stream.of("answer").map((event) => event.data.title)).toEqual(["water the plants", "call mum"]);
    expect(await deliveryStatus(app, "Time to **water** the plants!")).toBe("pending");
    expect(await deliveryStatus(app, "Call mum now.")).toBe("pending");

    // The home page: the bridge up but signal-cli missing (not green), the messages waiting and why.
    const shown = await status(app);
    expect(shown.services.find((service: Json) => service.name === "signal-bridge")).toEqual({
      name: "signal-bridge",
      ok: true,
      warning: "bridge up, signal-cli missing",
      detail: expect.stringContaining("signal-cli is not installed"),
    });
    expect(shown.channels.signal).toEqual({
      configured: true,
      bridgeOk: true,
      signalCli: "missing",
      problem: expect.stringContaining("set SIGNAL_CLI_PATH"),
    });
    expect(shown.queue.deliveries).toEqual({
      waiting: 2,
      givenUp: 0,
      failing: { channel: "signal", error: expect.stringContaining("signal-cli is not installed") },
    });
    const checks = (await raw(app.port, "GET", "/api/checks")).json.checks as Json[];
    expect(checks.find((check) => check.name === "signal")).toMatchObject({
      state: "fail",
      detail: expect.stringContaining("signal-cli is missing"),
    });

    // Installed: the bridge finds it, and the retries send both, in order; nobody saw them on a
    // console, so Signal is where they arrive, and their notifications go.
    install();
    await waitUntilListening(bridge);
    await vi.waitFor(
      async () => expect(await sentTo(OWNER)).toEqual(["Time to water the plants!", "Call mum now."]),
      WAIT,
    );
    await vi.waitFor(async () => expect(await listed(app)).toEqual([]), WAIT);
    expect(await pending(app)).toEqual([]);
    // The event stream may carry the second withdrawal a moment after the list is read empty.
    await vi.waitFor(
      () =>
        expect(stream.of("dismissed").map((event) => event.data.ids)).toEqual([[water.id], [kept[0]?.id]]),
      WAIT,
    );
    expect((await status(app)).queue.deliveries).toEqual({ waiting: 0, givenUp: 0 });
    stream.close();
  });

  it("shows a reminder in the next REPL with the reason, and does not send it on Signal once shown there", async () => {
    // signal-cli goes away again (removed, then it stops).
    rmSync(signalCli, { force: true });
    await bridge.control("/test/exit", { code: 1 });
    await vi.waitFor(() => expect(bridge.bridge.daemon.state).toBe("missing"), WAIT);
    await script.remind(app, { "feed the cat": "Feed the cat now." });
    await vi.waitFor(async () => expect(await pending(app)).toHaveLength(1), WAIT);

    const repl = asProcess([], {
      STAVROBOT_URL: `http://127.0.0.1:${app.port}`,
      STAVROBOT_PASSWORD: PASSWORD,
    });
    try {
      await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\n> $/), WAIT);
      expect(repl.stdout()).toMatch(
        /^While you were away:\n\n> feed the cat \(delivery\)\nSignal could not deliver this to you: signal-cli is not installed: .*\n\nFeed the cat now\.\n\n/,
      );
      repl.stdin.end();
      expect(await repl.exit).toBe(0);
    } finally {
      repl.kill();
    }
    // Shown: no console shows it again, and it no longer counts as waiting to be sent.
    await vi.waitFor(async () => expect(await pending(app)).toEqual([]), WAIT);
    expect((await status(app)).queue.deliveries).toMatchObject({ waiting: 0 });

    // Signal works again; the owner writes from it and is answered there, but the reminder they
    // have seen is not sent to them a second time.
    install();
    await waitUntilListening(bridge, 2);
    script.turns.push(textTurn("Hello from Signal."));
    await bridge.inbound({ source: OWNER, message: "hi" });
    await vi.waitFor(async () => expect(await sentTo(OWNER)).toContain("Hello from Signal."), WAIT);
    expect(await sentTo(OWNER)).not.toContain("Feed the cat now.");
    expect(await deliveryStatus(app, "Feed the cat now.")).toBe("withdrawn");
  });
});

describe("an owner on Signal while the Signal bridge is not running", () => {
  let fake: FakeLlmServer;
  let script: Script;
  let env: TestEnv;
  let app: RunningApp;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    script = new Script(fake);
    env = await createTestEnv(
      configFor(
        fake,
        "anthropic",
        `[owner]\nname = "Ada"\nsignal = "${OWNER}"\n[signal]\naccount = "${ACCOUNT}"\n`,
      ),
    );
    // Nothing listens there.
    Object.assign(env.env, { SIGNAL_BRIDGE_URL: `http://127.0.0.1:${await freePort()}` });
    app = await startApp({ env: env.env, logger: silentLogger });
  });

  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await env?.cleanup();
  });

  it("keeps a reminder for the owner's consoles, saying the bridge does not answer", async () => {
    await script.remind(app, { stretch: "Stretch your legs." });
    const [kept] = await vi.waitFor(async () => {
      const now = await listed(app);
      expect(now).toHaveLength(1);
      return now;
    }, WAIT);
    expect(kept?.title).toBe("stretch");
    expect(kept?.response).toMatch(
      /^Signal could not deliver this to you: the Signal bridge does not answer \(.*\); npm start \(or compose\) restarts it, and its log says why it stopped\.\n\nStretch your legs\.\n\n/,
    );
    expect(await pending(app)).toEqual([expect.objectContaining({ id: kept?.id, source: "delivery" })]);
    const shown = await status(app);
    expect(shown.services.find((service: Json) => service.name === "signal-bridge")).toMatchObject({
      ok: false,
    });
    expect(shown.queue.deliveries).toEqual({
      waiting: 1,
      givenUp: 0,
      failing: { channel: "signal", error: expect.stringContaining("the Signal bridge does not answer") },
    });
    expect(await deliveryStatus(app, "Stretch your legs.")).toBe("pending");
  });
});
