import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeServer, isMainModule, listen, silentLogger } from "@stavrobot/common";
import { createPluginHost } from "../src/host.js";
import { buildServer } from "../src/server.js";

const RUNS = 200;
const CONCURRENT = 100;
const EXTRA_TOOLS = 19;
const SECRET = randomBytes(24).toString("hex");
const SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n";

interface Scenario {
  plainSandbox: boolean;
  cacheManifests: boolean;
  /** Also time single runs (the per-run overhead), not only concurrent throughput. */
  timeSingles: boolean;
}

/**
 * Starts a real plugin-runner (buildServer on port 0, temp plugins dir, one trivial `#!/bin/sh` tool)
 * and measures what it adds to a tool run in each sandbox mode, and how many sync runs it
 * sustains concurrently with and without its manifest cache.
 */
export async function benchPluginRunner(): Promise<Record<string, string>> {
  const figures: Record<string, string> = {};
  const namespaces = await benchScenario({ plainSandbox: false, cacheManifests: true, timeSingles: true });
  const plain = await benchScenario({ plainSandbox: true, cacheManifests: true, timeSingles: true });
  const uncached = await benchScenario({ plainSandbox: false, cacheManifests: false, timeSingles: false });
  figures[`plugin-runner: direct spawn of a sh tool (median of ${RUNS})`] =
    `${namespaces.directMs.toFixed(1)} ms`;
  for (const [label, result] of [
    ["namespaces sandbox", namespaces],
    ["plain sandbox", plain],
  ] as const) {
    figures[`plugin-runner (${label}): sync run over HTTP (median of ${RUNS})`] =
      `${result.httpMs.toFixed(1)} ms`;
    figures[`plugin-runner (${label}): overhead per sync run (median)`] =
      `${(result.httpMs - result.directMs).toFixed(1)} ms`;
    figures[`plugin-runner (${label}): throughput, ${CONCURRENT} concurrent sync runs`] =
      `${result.throughput.toFixed(0)} runs/s`;
  }
  figures[`plugin-runner (namespaces): throughput without the manifest cache (20-tool plugin)`] =
    `${uncached.throughput.toFixed(0)} runs/s (the cache gives ×${(namespaces.throughput / uncached.throughput).toFixed(2)})`;
  figures["plugin-runner: sandbox here"] =
    `${namespaces.sandbox}; per-plugin users ${namespaces.users ? "on" : "off (not root)"}`;
  return figures;
}

async function benchScenario(scenario: Scenario) {
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
  // A plugin of a realistic size: every uncached run reads all of its manifests.
  for (let i = 0; i < EXTRA_TOOLS; i++) {
    const dir = join(root, "plugins", name, `tool_${i}`);
    await mkdir(dir);
    await writeFile(join(dir, "run.sh"), SCRIPT, { mode: 0o755 });
    await writeFile(join(dir, "manifest.json"), JSON.stringify({ ...toolManifest, name: `tool_${i}` }));
  }

  const host = createPluginHost({
    pluginsDir: join(root, "plugins"),
    cacheDir: join(root, "cache"),
    stateDir: join(root, "state"),
    appInternalUrl: "http://127.0.0.1:9",
    secret: SECRET,
    logger: silentLogger,
    plainSandbox: scenario.plainSandbox,
    cacheManifests: scenario.cacheManifests,
  });
  await host.start();
  const server = createServer(buildServer(host.deps));
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
    const direct = scenario.timeSingles
      ? await timeEach(RUNS, () => spawnDirect(join(toolDir, "run.sh"), toolDir))
      : [0];
    const overHttp = scenario.timeSingles ? await timeEach(RUNS, runOverHttp) : [0];
    const rates: number[] = [];
    for (let round = 0; round < 3; round++) {
      const started = performance.now();
      await Promise.all(Array.from({ length: CONCURRENT }, runOverHttp));
      rates.push(CONCURRENT / ((performance.now() - started) / 1000));
    }
    return {
      directMs: median(direct),
      httpMs: median(overHttp),
      throughput: median(rates),
      sandbox: host.sandbox.mode,
      users: host.isolation.enabled,
    };
  } finally {
    await closeServer(server);
    await host.deps.lifecycle.remove(name).catch(() => undefined);
    await host.stop();
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
