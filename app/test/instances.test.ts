import { execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { Router, basicAuthHeader, runService, silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { PASSWORD, configFor, createTestEnv, post, type TestEnv } from "./helpers/app.js";
import {
  NPM_START,
  NPM_START_ENV,
  freePort,
  repoRoot,
  runToExit,
  startAppProcess,
  type AppProcess,
} from "./helpers/process.js";

// Two instances on one machine: one data directory has one running instance, and a second
// checkout that finds a port taken stops at once saying which, in one line.

let fake: FakeLlmServer | undefined;
const envs: TestEnv[] = [];
const running: AppProcess[] = [];
const servers: Server[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const app of running.splice(0)) await app.stop();
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  for (const env of envs.splice(0)) await env.cleanup();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  await fake?.close();
  fake = undefined;
});

const LAUNCHER = ["app/src/boot/start-local.ts"];

/** Every port of a start, free ones. */
async function freePorts(): Promise<Record<string, string>> {
  const names = [
    "PORT",
    "INTERNAL_PORT",
    "PLUGIN_RUNNER_PORT",
    "PYTHON_RUNNER_PORT",
    "CODER_PORT",
    "SIGNAL_BRIDGE_PORT",
    "WHATSAPP_BRIDGE_PORT",
  ];
  const ports: Record<string, string> = {};
  for (const name of names) ports[name] = String(await freePort());
  return ports;
}

/** The last line a refused start printed, checking there is no stack trace. */
function lastLine(output: string): string {
  expect(output).not.toMatch(/\n\s+at /);
  return output.trim().split("\n").at(-1) as string;
}

/** The one line a refused start prints: no stack trace, nothing else. */
function oneLine(output: string): string {
  const lines = output.trim().split("\n");
  expect(lines, output).toHaveLength(1);
  expect(output).not.toMatch(/\n\s+at /);
  return lines[0] as string;
}

const healthy = (port: number): Promise<boolean> =>
  fetch(`http://127.0.0.1:${port}/health`).then(
    (response) => response.ok,
    () => false,
  );

async function newEnv(): Promise<TestEnv> {
  fake ??= await startFakeAnthropic();
  const env = await createTestEnv(configFor(fake));
  envs.push(env);
  return env;
}

async function start(env: NodeJS.ProcessEnv, command?: string[]): Promise<AppProcess> {
  const app = await startAppProcess(env, 60_000, command);
  running.push(app);
  return app;
}

describe("two npm start on one data directory", () => {
  it("refuses the second, naming the first's pid; the first keeps running with its data", async () => {
    const testEnv = await newEnv();
    const first = await start(testEnv.env);
    fake!.enqueue(textTurn("Noted: the blue door."));
    expect((await post(first.port, "/chat", { message: "remember the blue door" })).status).toBe(200);

    const ports = await freePorts();
    const second = await runToExit(LAUNCHER, { ...testEnv.env, ...ports });
    expect(second.code).toBe(69);
    expect(oneLine(second.output)).toContain(
      `Another Stavrobot (pid ${first.child.pid}) is running on the data directory ${testEnv.dir}: stop it first`,
    );
    // Nothing of the second started: not even its plugin-runner.
    expect(await healthy(Number(ports.PLUGIN_RUNNER_PORT))).toBe(false);

    // The first goes on, its conversation whole.
    fake!.enqueue(textTurn("The blue one."));
    const before = fake!.requests.length;
    expect((await post(first.port, "/chat", { message: "which door?" })).body.response).toBe("The blue one.");
    expect(JSON.stringify(fake!.requests[before]?.body)).toContain("remember the blue door");

    // Stopped cleanly, it leaves no lock behind; killed, its lock is taken over by the next start.
    await running.pop()!.stop();
    expect(existsSync(join(testEnv.dir, "instance.lock"))).toBe(false);
    await start(testEnv.env);
    expect(existsSync(join(testEnv.dir, "instance.lock"))).toBe(true);
    await running.pop()!.stop("SIGKILL");
    expect(existsSync(join(testEnv.dir, "instance.lock"))).toBe(true);
    const afterKill = await start(testEnv.env);
    fake!.enqueue(textTurn("Still the blue one."));
    const next = fake!.requests.length;
    expect((await post(afterKill.port, "/chat", { message: "and now?" })).status).toBe(200);
    expect(JSON.stringify(fake!.requests[next]?.body)).toContain("remember the blue door");
  }, 240_000);
});

describe("npm start right after the previous one was killed with kill -9", () => {
  it("starts at once while the killed launcher is a zombie its parent has not reaped", async () => {
    const testEnv = await newEnv();
    const ports = await freePorts();
    // npm start's launcher whose parent outlives it without collecting its exit status (sh,
    // replaced by sleep): after a kill -9 of its process group it stays a zombie, as npm's
    // launcher does until init reaps it. setsid gives it a process group of its own, as npm's has.
    const parent = spawn(
      "sh",
      ["-c", 'setsid "$@" & echo "$!"; exec sleep 3600', "sh", process.execPath, ...NPM_START],
      {
        cwd: repoRoot,
        env: { ...testEnv.env, ...NPM_START_ENV, ...ports },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let log = "";
    parent.stderr.on("data", (chunk: Buffer) => (log += chunk.toString()));
    try {
      const launcher = await new Promise<number>((resolve) =>
        parent.stdout.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim()))),
      );
      await vi
        .waitUntil(() => healthy(Number(ports.PORT)), { timeout: 60_000, interval: 100 })
        .catch((error: Error) => Promise.reject(new Error(`${error.message}:\n${log}`)));
      fake!.enqueue(textTurn("Noted: the green gate."));
      expect((await post(Number(ports.PORT), "/chat", { message: "remember the green gate" })).status).toBe(
        200,
      );
      const lock = join(testEnv.dir, "instance.lock");
      expect((JSON.parse(readFileSync(lock, "utf8")) as { pid: number }).pid).toBe(launcher);

      process.kill(-launcher, "SIGKILL");
      // Started again at once: not refused as "Another Stavrobot (pid …) is running".
      const next = await start(testEnv.env, NPM_START);
      expect(readFileSync(`/proc/${launcher}/stat`, "utf8")).toMatch(/\) Z /);
      fake!.enqueue(textTurn("The green one."));
      const before = fake!.requests.length;
      // The answer the kill kept from being marked received comes first (it may not have arrived).
      expect((await post(next.port, "/chat", { message: "which gate?" })).body.response).toContain(
        "The green one.",
      );
      expect(JSON.stringify(fake!.requests[before]?.body)).toContain("remember the green gate");
    } finally {
      parent.kill("SIGKILL");
    }
  }, 180_000);
});

describe("two npm start from different data directories", () => {
  it("stops the second when a sibling's port is taken, naming the port and its variable", async () => {
    const first = await start((await newEnv()).env);
    await vi.waitUntil(() => healthy(first.runnerPort), { timeout: 30_000, interval: 100 });
    const other = await newEnv();
    const ports = { ...(await freePorts()), PLUGIN_RUNNER_PORT: String(first.runnerPort) };
    const second = await runToExit(LAUNCHER, { ...other.env, ...ports });
    expect(second.code).toBe(69);
    const line = oneLine(second.output);
    expect(line).toContain(
      `Ports in use by another program (or another Stavrobot): ${first.runnerPort} (PLUGIN_RUNNER_PORT)`,
    );
    expect(line).toMatch(/e\.g\. PLUGIN_RUNNER_PORT=\d+ npm start/);
    // The first instance's runner is still its own and still answers it.
    expect(await healthy(first.runnerPort)).toBe(true);
    expect(existsSync(join(other.dir, "instance.lock"))).toBe(false);
  }, 120_000);

  it("names every port in use at once, the app's own included", async () => {
    const taken = await Promise.all([listenOn(), listenOn()]);
    const env = (await newEnv()).env;
    const ports = { ...(await freePorts()), PORT: String(taken[0]), PYTHON_RUNNER_PORT: String(taken[1]) };
    const result = await runToExit(LAUNCHER, { ...env, ...ports });
    expect(result.code).toBe(69);
    expect(oneLine(result.output)).toContain(
      `${taken[0]} (PORT), ${taken[1]} (PYTHON_RUNNER_PORT). Set those variables`,
    );
  }, 60_000);
});

describe("a sibling that is not this instance's", () => {
  it("is refused by the app, which says whose it is not and which variable moves it", async () => {
    const app = await start((await newEnv()).env);
    await vi.waitUntil(() => healthy(app.runnerPort), { timeout: 30_000, interval: 100 });
    const status = async () => {
      const response = await fetch(`http://127.0.0.1:${app.port}/api/status`, {
        headers: { Authorization: basicAuthHeader(PASSWORD) },
      });
      const body = (await response.json()) as { services: { name: string; ok: boolean; detail?: string }[] };
      return body.services.find((service) => service.name === "plugin-runner");
    };
    expect((await status())?.ok).toBe(true);
    // Its runner dies, and another instance's takes the port before the launcher restarts it. On
    // a busy machine the launcher may be quicker: its runner is ended again until the other wins.
    const takePort = () =>
      runService(
        { name: "plugin-runner", env: z.object({}), build: () => ({ router: new Router() }) },
        {
          env: {
            PORT: String(app.runnerPort),
            STAVROBOT_INTERNAL_SECRET: "another-instance-secret-0123",
            STAVROBOT_INSTANCE_ID: "another-instance",
          },
          handleSignals: false,
          logger: silentLogger,
        },
      );
    let foreign: Awaited<ReturnType<typeof takePort>> | undefined;
    for (let attempt = 1; !foreign; attempt++) {
      const runnerPid = Number(
        execFileSync("pgrep", ["-P", String(app.child.pid), "-f", "plugin-runner"]).toString(),
      );
      process.kill(runnerPid, "SIGKILL");
      await vi.waitUntil(async () => !(await healthy(app.runnerPort)), { timeout: 10_000, interval: 20 });
      foreign = await takePort().catch((error: unknown) => {
        if (attempt >= 5) throw error;
        return undefined;
      });
      if (!foreign) await vi.waitUntil(() => healthy(app.runnerPort), { timeout: 30_000, interval: 100 });
    }
    try {
      const seen = await status();
      expect(seen?.ok).toBe(false);
      expect(seen?.detail).toBe(
        `The plugin-runner at http://127.0.0.1:${app.runnerPort} is not this Stavrobot's: another program ` +
          "(or another Stavrobot) listens on its port. Set PLUGIN_RUNNER_PORT to a free port and restart.",
      );
      // The launcher, restarting its own runner, is told in one line why it cannot.
      await vi.waitUntil(() => app.output().includes(`set PLUGIN_RUNNER_PORT to a free port`), {
        timeout: 15_000,
        interval: 100,
      });
    } finally {
      await foreign.stop();
    }
    // Once the port is free again, its own runner is back, and used.
    await vi.waitUntil(async () => (await status())?.ok === true, { timeout: 60_000, interval: 250 });
  }, 120_000);
});

describe("a port in use", () => {
  it("stops the app started on its own (the image's entry) in one line naming PORT", async () => {
    const port = await listenOn();
    const env = (await newEnv()).env;
    const result = await runToExit(["app/src/boot/main.ts"], {
      ...env,
      PORT: String(port),
      INTERNAL_PORT: "0",
    });
    expect(result.code).toBe(69);
    expect(lastLine(result.output)).toContain(
      `app: port ${port} on 127.0.0.1 is in use by another program (or another Stavrobot): set PORT to a free port`,
    );
  }, 60_000);

  it("stops a sibling service in one line naming the variable its launcher gave", async () => {
    const port = await listenOn();
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-sibling-"));
    dirs.push(dir);
    const result = await runToExit(["plugin-runner/src/main.ts"], {
      PATH: process.env.PATH,
      PORT: String(port),
      STAVROBOT_PORT_VARIABLE: "PLUGIN_RUNNER_PORT",
      STAVROBOT_INTERNAL_SECRET: "a-secret-of-sixteen-or-more",
      PLUGINS_DIR: join(dir, "plugins"),
      PLUGIN_CACHE_DIR: join(dir, "cache"),
      PLUGIN_RUNNER_STATE_DIR: join(dir, "state"),
      PLUGIN_SANDBOX: "plain",
    });
    expect(result.code).toBe(69);
    expect(result.output).toContain(
      `plugin-runner: port ${port} on 127.0.0.1 is in use by another program (or another Stavrobot): set PLUGIN_RUNNER_PORT to a free port`,
    );
    expect(result.output).not.toMatch(/\n\s+at /);
  }, 60_000);
});

describe("a data directory this user cannot write", () => {
  it("stops npm start in one line naming the directory and the fix", async () => {
    const env = (await newEnv()).env;
    const dataDir = mkdtempSync(join(tmpdir(), "stavrobot-readonly-"));
    dirs.push(dataDir);
    chmodSync(dataDir, 0o500);
    const { CONFIG_PATH: _config, ...rest } = env;
    const result = await runToExit(
      LAUNCHER,
      { ...rest, ...(await freePorts()), DATA_DIR: dataDir },
      { asOrdinaryUser: true },
    );
    expect(result.code).toBe(73);
    const line = oneLine(result.output);
    expect(line).toContain(`Cannot write ${join(dataDir, "instance.lock")}`);
    expect(line).toContain("EACCES");
    expect(line).toContain("set DATA_DIR to a directory this user can write");
  }, 60_000);

  it("says how to make one that does not exist yet, where its folder may not be written", async () => {
    const parent = mkdtempSync(join(tmpdir(), "stavrobot-closed-"));
    dirs.push(parent);
    chmodSync(parent, 0o500);
    const dataDir = join(parent, "stavrobot", "data");
    const env = (await newEnv()).env;
    const { CONFIG_PATH: _config, ...rest } = env;
    const result = await runToExit(
      LAUNCHER,
      { ...rest, ...(await freePorts()), DATA_DIR: dataDir },
      { asOrdinaryUser: true },
    );
    expect(result.code).toBe(73);
    const line = oneLine(result.output);
    const uid = process.getuid!();
    expect(line).toContain(
      `${dataDir} does not exist yet and this user (uid ${uid}) may not create it in ${parent}`,
    );
    expect(line).toContain(`sudo mkdir -p ${dataDir} && sudo chown -R ${uid} ${dataDir}`);
    // Not a chown of a folder that is not there.
    expect(line).not.toContain("give it to this user (e.g. sudo chown");
    expect(existsSync(join(parent, "stavrobot"))).toBe(false);
  }, 60_000);

  it("names the path when only a directory inside it is not writable (a start as root before)", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "stavrobot-mixed-"));
    dirs.push(dataDir);
    mkdirSync(join(dataDir, "main"), { mode: 0o500 });
    chmodSync(join(dataDir, "main"), 0o500);
    const result = await runToExit(
      LAUNCHER,
      { PATH: process.env.PATH, HOME: process.env.HOME, ...(await freePorts()), DATA_DIR: dataDir },
      { asOrdinaryUser: true },
    );
    expect(result.code).toBe(73);
    const line = lastLine(result.output);
    expect(line).toContain(`Cannot write ${join(dataDir, "main")}`);
    expect(line).toContain("EACCES");
  }, 60_000);
});

/** A loopback listener of another program; its port. */
async function listenOn(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as { port: number }).port;
}
