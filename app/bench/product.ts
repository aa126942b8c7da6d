/**
 * Starting the product for the benchmark exactly as `npm start` does (the launcher, its siblings,
 * the app), timing how long it takes until an authenticated request is answered.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { basicAuthHeader } from "@stavrobot/common";
import { freePort } from "@stavrobot/common/test-support";
import { PASSWORD } from "../test/helpers/app.js";
import { NPM_START, NPM_START_ENV, repoRoot } from "../test/helpers/process.js";
import { timeUntil } from "./measure.js";

export interface RunningProduct {
  child: ChildProcess;
  url: string;
  password: string;
  /** From spawn to the first 200 of an authenticated request. */
  startMs: number;
  /** The last 20,000 characters the product wrote to stderr (its log). */
  log(): string;
  stop(): Promise<void>;
}

/** BENCH_CPU_PROF=<dir>: the product's process writes a V8 CPU profile there when it stops. */
function profileFlags(): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

export async function launchProduct(env: NodeJS.ProcessEnv): Promise<RunningProduct> {
  const port = await freePort();
  const ports = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const started = performance.now();
  const child = spawn(process.execPath, [...profileFlags(), ...NPM_START], {
    cwd: repoRoot,
    env: {
      ...env,
      ...NPM_START_ENV,
      PORT: String(port),
      INTERNAL_PORT: String(ports[0]),
      PLUGIN_RUNNER_PORT: String(ports[1]),
      PYTHON_RUNNER_PORT: String(ports[2]),
      CODER_PORT: String(ports[3]),
      SIGNAL_BRIDGE_PORT: String(ports[4]),
    },
    stdio: ["ignore", "ignore", "pipe"],
    detached: true,
  });
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-20_000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const authorization = basicAuthHeader(PASSWORD);
  try {
    await timeUntil(async () => {
      if (child.exitCode !== null) throw new Error(`the product exited:\n${log}`);
      const answer = await fetch(`${url}/api/answers/pending`, { headers: { Authorization: authorization } });
      await answer.arrayBuffer();
      return answer.status === 200;
    });
  } catch (error) {
    kill(child, "SIGKILL");
    throw new Error(`${(error as Error).message}\n${log}`);
  }
  const startMs = performance.now() - started;
  return {
    child,
    url,
    password: PASSWORD,
    startMs,
    log: () => log,
    async stop() {
      kill(child, "SIGTERM");
      await exited;
      // Its process group (siblings) must be gone before the data directory is removed.
      await timeUntil(async () => !alive(child), 30_000).catch(() => kill(child, "SIGKILL"));
    },
  };
}

function kill(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-(child.pid as number), signal);
  } catch {
    // Already gone.
  }
}

function alive(child: ChildProcess): boolean {
  try {
    process.kill(-(child.pid as number), 0);
    return true;
  } catch {
    return false;
  }
}
