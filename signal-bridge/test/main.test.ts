import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { freePort, spawnServiceProcess } from "@stavrobot/common/test-support";
import type { FakeApp } from "./helpers.js";
import { ACCOUNT, FAKE_SIGNAL_CLI, SECRET, startFakeApp } from "./helpers.js";

/** Running, not merely a zombie nobody reaped. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false;
  }
}

async function refused(url: string): Promise<boolean> {
  return fetch(url).then(
    () => false,
    () => true,
  );
}

describe("main.ts as a real process", () => {
  const root = mkdtempSync(join(tmpdir(), "signal-bridge-main-"));
  let app: FakeApp;
  const env: NodeJS.ProcessEnv = {};
  let url = "";
  let signalCliUrl = "";

  beforeAll(async () => {
    app = await startFakeApp();
    const port = await freePort();
    const signalCliPort = await freePort();
    url = `http://127.0.0.1:${port}`;
    signalCliUrl = `http://127.0.0.1:${signalCliPort}`;
    Object.assign(env, {
      PORT: String(port),
      SIGNAL_ACCOUNT: ACCOUNT,
      SIGNAL_CLI_PATH: FAKE_SIGNAL_CLI,
      SIGNAL_CLI_CONFIG_DIR: join(root, "signal-cli"),
      SIGNAL_CLI_HTTP_PORT: String(signalCliPort),
      SIGNAL_BRIDGE_STATE_DIR: join(root, "state"),
      APP_INTERNAL_URL: app.url,
      STAVROBOT_INTERNAL_SECRET: SECRET,
      STAVROBOT_EXIT_WITH_PARENT: undefined,
    });
  });

  afterAll(async () => {
    await app.close();
    rmSync(root, { recursive: true, force: true });
  });

  async function startBridge(extraEnv: NodeJS.ProcessEnv = {}) {
    const service = await spawnServiceProcess({
      entry: "signal-bridge/src/main.ts",
      env: { ...env, ...extraEnv },
    });
    const signalCliPid = async (): Promise<number> => {
      const pid = await vi.waitFor(() => {
        const match = /signal-cli started \{"pid":(\d+)\}/.exec(service.log());
        if (!match) throw new Error("signal-cli has not started yet");
        return match[1];
      }, 20_000);
      return Number(pid);
    };
    const ready = () =>
      service.healthy({
        timeoutMs: 30_000,
        ready: (health) => (health as { signalCli: string }).signalCli === "running",
      });
    return { service, signalCliPid, ready };
  }

  it("serves behind the secret, reports signal-cli in /health, and stops signal-cli on SIGTERM", async () => {
    const bridge = await startBridge();
    try {
      await bridge.ready();
      expect(await (await fetch(`${url}/health`)).json()).toEqual({
        status: "ok",
        signalCli: "running",
        account: ACCOUNT,
      });
      const anonymous = await fetch(`${url}/send`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ recipient: "+15550002222", message: "hi" }),
      });
      expect(anonymous.status).toBe(401);
      const sent = await fetch(`${url}/send`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${SECRET}` },
        body: JSON.stringify({ recipient: "+15550002222", message: "hi" }),
      });
      expect(sent.status).toBe(200);
      // Incoming messages reach the app with the internal secret.
      await fetch(`${signalCliUrl}/test/inbound`, {
        method: "POST",
        body: JSON.stringify({ source: "+15550002222", message: "hello bridge" }),
      });
      await vi.waitFor(() => expect(app.messages.map((m) => m.message)).toContain("hello bridge"), {
        timeout: 10_000,
      });
      expect(app.authorizations.at(-1)).toBe(`Bearer ${SECRET}`);
    } finally {
      bridge.service.child.kill("SIGTERM");
    }
    const pid = await bridge.signalCliPid();
    expect(await bridge.service.exited).toBe(0);
    expect(bridge.service.log()).toContain("signal-bridge listening");
    expect(running(pid)).toBe(false);
    expect(await refused(`${signalCliUrl}/api/v1/check`)).toBe(true);
  });

  it("stops the signal-cli a killed bridge left behind before starting its own", async () => {
    const first = await startBridge();
    await first.ready();
    const orphan = await first.signalCliPid();
    first.service.child.kill("SIGKILL");
    await first.service.exited;
    expect(running(orphan)).toBe(true);

    const second = await startBridge();
    try {
      await second.ready();
      expect(second.service.log()).toContain("stopping a signal-cli left running by a previous bridge");
      expect(running(orphan)).toBe(false);
      expect(await second.signalCliPid()).not.toBe(orphan);
    } finally {
      second.service.child.kill("SIGTERM");
    }
    expect(await second.service.exited).toBe(0);
  });

  it("exits 78 naming the variable when SIGNAL_ACCOUNT is not a phone number", async () => {
    const bridge = await startBridge({ SIGNAL_ACCOUNT: "my-bot" });
    expect(await bridge.service.exited).toBe(78);
    expect(bridge.service.log()).toContain("SIGNAL_ACCOUNT");
  });
});
