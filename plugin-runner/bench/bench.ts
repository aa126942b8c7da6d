import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeServer, isMainModule, listen, silentLogger } from "@stavrobot/common";
import { createRunner } from "../src/runtime.js";
import { buildServer } from "../src/server.js";

const RUNS = 200;
const CONCURRENT = 100;
const SECRET = randomBytes(24).toString("hex");
const SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n";

/**
 * Starts a real runner (buildServer on port 0, temp plugins dir, one trivial `#!/bin/sh` tool) and
 * measures what the runner adds to a tool run, and how many sync runs it sustains concurrently.
 */
export async function benchPluginRunner(): Promise<Record<string, string>> {
  const root = await mkdtemp(join(tmpdir(), "plugin-runner-bench-"));
  await chmod(root, 0o711);
  const name = `bench-${randomBytes(3).toString("hex")}`;
  const toolDir = join(root, "plugins", name, "noop");
  await mkdir(toolDir, { recursive: true });
  await writeFile(
    join(root, "plugins", name, "manifest.json"),
    JSON.stringify({ name, description: "Bench" }),
  );
  await writeFile(join(toolDir, "run.sh"), SCRIPT, { mode: 0o755 });
  const toolManifest = { name: "noop", description: "No-op", entrypoint: "run.sh", parameters: {} };
  await writeFile(join(toolDir, "manifest.json"), JSON.stringify(toolManifest));

  const runner = createRunner({
    pluginsDir: join(root, "plugins"),
    cacheDir: join(root, "cache"),
    stateDir: join(root, "state"),
    runsDir: join(root, "runs"),
    appInternalUrl: "http://127.0.0.1:9",
    secret: SECRET,
    logger: silentLogger,
  });
  await runner.start();
  const server = createServer(buildServer(runner.deps));
  const port = await listen(server, 0);
  const url = `http://127.0.0.1:${port}/bundles/${name}/tools/noop/run`;
  const runOverHttp = async (): Promise<void> => {
    const response = await fetch(url, {
      method: "POST",
      headers: { Authorization: `Bearer ${SECRET}`, "Content-Type": "application/json" },
      body: "{}",
    });
    const body = (await response.json()) as { success?: boolean };
    if (response.status !== 200 || body.success !== true)
      throw new Error(`run failed: ${JSON.stringify(body)}`);
  };

  try {
    for (let i = 0; i < 5; i++) await runOverHttp(); // warm-up (creates the plugin user on first run)
    const direct = await timeEach(RUNS, () => spawnDirect(join(toolDir, "run.sh"), toolDir));
    const overHttp = await timeEach(RUNS, runOverHttp);
    const started = performance.now();
    await Promise.all(Array.from({ length: CONCURRENT }, runOverHttp));
    const seconds = (performance.now() - started) / 1000;
    const directMs = median(direct);
    const httpMs = median(overHttp);
    return {
      [`plugin-runner: direct spawn of a sh tool (median of ${RUNS})`]: `${directMs.toFixed(1)} ms`,
      [`plugin-runner: sync run over HTTP (median of ${RUNS})`]: `${httpMs.toFixed(1)} ms`,
      "plugin-runner: overhead per sync run (median)": `${(httpMs - directMs).toFixed(1)} ms`,
      [`plugin-runner: throughput, ${CONCURRENT} concurrent sync runs`]: `${(CONCURRENT / seconds).toFixed(0)} runs/s`,
      "plugin-runner: isolation": runner.isolation.enabled ? "on (per-plugin users)" : "off (not root)",
    };
  } finally {
    await closeServer(server);
    await runner.deps.lifecycle.remove(name).catch(() => undefined);
    await runner.stop();
    await rm(root, { recursive: true, force: true });
  }
}

export async function timeEach(count: number, work: () => Promise<unknown>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await work();
    times.push(performance.now() - started);
  }
  return times;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** The same entrypoint, spawned the plain way: params on stdin, wait for it to finish. */
export function spawnDirect(entrypoint: string, cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(entrypoint, [], {
      cwd,
      env: { PATH: "/usr/bin:/bin" },
      stdio: ["pipe", "pipe", "ignore"],
    });
    child.stdout.resume();
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
    child.stdin.end("{}");
  });
}

if (isMainModule(import.meta.url)) {
  const figures = await benchPluginRunner();
  for (const [key, value] of Object.entries(figures)) console.log(`${key}: ${value}`);
}
