import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { freePort, waitFor } from "@stavrobot/common/test-support";

export const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

export { freePort, waitFor };

export interface AppProcess {
  child: ChildProcess;
  port: number;
  internalPort: number;
  runnerPort: number;
  output: () => string;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Runs the app exactly as `npm start` does, as a separate process, and waits for /health. */
export async function startAppProcess(env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<AppProcess> {
  const port = await freePort();
  const internalPort = await freePort();
  const runnerPort = await freePort();
  const child = spawn(
    process.execPath,
    ["--conditions=source", "--import", "tsx", "app/src/start-local.ts"],
    {
      cwd: repoRoot,
      env: {
        ...env,
        PORT: String(port),
        INTERNAL_PORT: String(internalPort),
        PLUGIN_RUNNER_PORT: String(runnerPort),
      },
      stdio: ["ignore", "pipe", "pipe"],
      // Its own process group: stop() reaches the plugin-runner child too and waits for both.
      detached: true,
    },
  );
  let log = "";
  child.stdout?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`app exited early:\n${log}`);
    try {
      const response = await fetch(`http://127.0.0.1:${port}/health`);
      if (response.ok) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      process.kill(-(child.pid as number), "SIGKILL");
      throw new Error(`app did not start in time:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    child,
    port,
    internalPort,
    runnerPort,
    output: () => log,
    exited,
    async stop(signal = "SIGTERM") {
      const group = -(child.pid as number);
      try {
        process.kill(group, signal);
      } catch {
        // Already gone.
      }
      const code = await exited;
      // Nothing of this app may still be writing to its data directory when a test removes it.
      await waitFor(
        () => {
          try {
            process.kill(group, 0);
            return false;
          } catch {
            return true;
          }
        },
        10_000,
        "the app's processes to exit",
      );
      return code;
    },
  };
}
