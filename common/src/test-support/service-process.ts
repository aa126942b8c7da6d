import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import { vi } from "vitest";
import { freePort } from "./net.js";

const REPO_ROOT = fileURLToPath(new URL("../../..", import.meta.url));

export interface ServiceProcessOptions {
  /** The entry file: relative to the repository root (`"coder/src/main.ts"`) or absolute. */
  entry: string;
  /** Set over this process's environment; a variable given as undefined is removed. */
  env?: NodeJS.ProcessEnv;
  /** Start from an empty environment (PATH kept) instead of this process's. */
  cleanEnv?: boolean;
  /** Default: a free loopback port, passed as PORT (unless `env.PORT` names one). */
  port?: number;
  /** "pipe" keeps stdin open, as the launcher does (`STAVROBOT_EXIT_WITH_PARENT`). */
  stdin?: "ignore" | "pipe";
}

export interface ServiceProcess {
  child: ChildProcess;
  port: number;
  url: string;
  /** Everything it wrote to stderr (its log) so far. */
  log(): string;
  /** Its exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  /**
   * Resolves with the body of `GET /health` once it answers 2xx and `ready` (if given) holds for
   * that body.
   */
  healthy(options?: { timeoutMs?: number; ready?: (health: unknown) => boolean }): Promise<unknown>;
  /** Sends `signal` (default SIGTERM) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts a service's `main.ts` as the real process it is in production (through tsx). */
export async function spawnServiceProcess(options: ServiceProcessOptions): Promise<ServiceProcess> {
  const base: NodeJS.ProcessEnv = options.cleanEnv ? { PATH: process.env.PATH } : { ...process.env };
  const port = options.port ?? (options.env?.PORT ? Number(options.env.PORT) : await freePort());
  const env: NodeJS.ProcessEnv = { ...base, PORT: String(port), ...options.env };
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key];
  const entry = isAbsolute(options.entry) ? options.entry : join(REPO_ROOT, options.entry);
  const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", entry], {
    cwd: REPO_ROOT,
    env,
    stdio: [options.stdin ?? "ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  return {
    child,
    port,
    url,
    log: () => log,
    exited,
    async healthy({ timeoutMs = 30_000, ready } = {}) {
      const polling = vi.waitFor(
        async () => {
          const response = await fetch(`${url}/health`);
          if (!response.ok) throw new Error(`GET /health answered ${response.status}`);
          const health: unknown = await response.json();
          if (ready && !ready(health)) throw new Error(`not ready yet: ${JSON.stringify(health)}`);
          return health;
        },
        { timeout: timeoutMs, interval: 100 },
      );
      polling.catch(() => undefined); // Handled below; the race may have been decided by an exit.
      let settled = false;
      const died = exited.then((code) => {
        if (!settled) throw new Error(`${options.entry} exited (${code}) before it was healthy:\n${log}`);
      });
      try {
        return await Promise.race([polling, died.then(() => polling)]);
      } finally {
        settled = true;
      }
    },
    stop: (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** `spawnServiceProcess`, then waits until `GET /health` answers. */
export async function startServiceProcess(
  options: ServiceProcessOptions & { timeoutMs?: number },
): Promise<ServiceProcess> {
  const service = await spawnServiceProcess(options);
  try {
    await service.healthy({ timeoutMs: options.timeoutMs });
  } catch (error) {
    await service.stop("SIGKILL");
    throw error;
  }
  return service;
}
