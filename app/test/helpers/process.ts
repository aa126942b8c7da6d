import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { vi } from "vitest";
import { freePort } from "@stavrobot/common/test-support";

export const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

export { freePort };

export interface AppProcess {
  child: ChildProcess;
  port: number;
  internalPort: number;
  runnerPort: number;
  pythonRunnerPort: number;
  coderPort: number;
  output: () => string;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * The launcher from its sources, under the test loader: only for a test that needs what the
 * sources give and the bundles do not (it says why where it uses this).
 */
export const LAUNCHER_FROM_SOURCES = [
  "--conditions=source",
  "--import",
  "tsx",
  "app/src/boot/start-local.ts",
];
/** package.json's "start" script: the variables it sets, and node's arguments (its flags, the script). */
const startScript = parseStartScript();
/** `npm start` itself (package.json's "start" script): bundles when needed, runs the bundles. */
export const NPM_START: string[] = startScript.args;
/**
 * The variables that script sets before node starts (the C allocator reads its settings when the
 * process begins, so the launcher cannot set them itself): whatever runs NPM_START sets them too.
 */
export const NPM_START_ENV: Record<string, string> = startScript.env;

function parseStartScript(): { env: Record<string, string>; args: string[] } {
  const manifest = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
    scripts: { start: string };
  };
  const match = /^((?:\w+=\S+\s+)*)node\s+(.+)$/.exec(manifest.scripts.start);
  if (!match)
    throw new Error(`package.json's start script is not "VAR=value ... node ...": ${manifest.scripts.start}`);
  const words = (text: string) => text.split(/\s+/).filter(Boolean);
  return {
    env: Object.fromEntries(
      words(match[1] ?? "").map((assignment) => assignment.split("=", 2) as [string, string]),
    ),
    args: words(match[2] as string),
  };
}

/**
 * Runs `npm start` (the bundles, with its flags and variables) as a separate process in a group
 * of its own, and waits for /health.
 */
export async function startAppProcess(
  env: NodeJS.ProcessEnv,
  timeoutMs = 120_000,
  command: string[] = NPM_START,
): Promise<AppProcess> {
  const port = await freePort();
  const internalPort = await freePort();
  const runnerPort = await freePort();
  const pythonRunnerPort = await freePort();
  const coderPort = await freePort();
  const signalBridgePort = await freePort();
  const whatsappBridgePort = await freePort();
  const child = spawn(process.execPath, command, {
    cwd: repoRoot,
    env: {
      ...env,
      ...(command === NPM_START && NPM_START_ENV),
      PORT: String(port),
      INTERNAL_PORT: String(internalPort),
      PLUGIN_RUNNER_PORT: String(runnerPort),
      PYTHON_RUNNER_PORT: String(pythonRunnerPort),
      CODER_PORT: String(coderPort),
      SIGNAL_BRIDGE_PORT: String(signalBridgePort),
      WHATSAPP_BRIDGE_PORT: String(whatsappBridgePort),
    },
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group: stop() reaches the sibling services too and waits for them all.
    detached: true,
  });
  let log = "";
  child.stdout?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const group = -(child.pid as number);
  try {
    // waitUntil stops at once when the check throws: an app that exited will not come up.
    await vi.waitUntil(
      () => {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error("app exited early");
        return fetch(`http://127.0.0.1:${port}/health`).then(
          (response) => response.ok,
          () => false, // Not listening yet.
        );
      },
      { timeout: timeoutMs, interval: 100 },
    );
  } catch (error) {
    killGroup(group, "SIGKILL");
    throw new Error(`${(error as Error).message} (app did not start):\n${log}`);
  }
  return {
    child,
    port,
    internalPort,
    runnerPort,
    pythonRunnerPort,
    coderPort,
    output: () => log,
    exited,
    async stop(signal = "SIGTERM") {
      killGroup(group, signal);
      const code = await exited;
      // Nothing of this app may still be writing to its data directory when a test removes it.
      await vi.waitUntil(() => !killGroup(group, 0), { timeout: 10_000 });
      return code;
    },
  };
}

/** Sends a signal to a process group; false when no process of it is left. */
function killGroup(group: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(group, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs a TypeScript entry of the repository (from its sources) to its exit: its code and
 * everything it wrote. `asOrdinaryUser`: when the tests run as root, the process runs without the
 * capabilities that let root write anywhere, as any other user would. `javascript`: the entry is
 * a JavaScript file, run by plain node as npm runs its scripts.
 */
export async function runToExit(
  args: string[],
  env: NodeJS.ProcessEnv,
  options: { asOrdinaryUser?: boolean; timeoutMs?: number; javascript?: boolean } = {},
): Promise<{ code: number | null; output: string }> {
  const loader = options.javascript ? [] : ["--conditions=source", "--import", "tsx"];
  const node = [process.execPath, ...loader, ...args];
  const command =
    options.asOrdinaryUser && process.getuid?.() === 0
      ? ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--", ...node]
      : node;
  const child = spawn(command[0] as string, command.slice(1), { cwd: repoRoot, env });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const killer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  clearTimeout(killer);
  return { code, output };
}
