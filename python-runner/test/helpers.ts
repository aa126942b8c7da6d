import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import type { Server } from "node:http";
import { join } from "node:path";
import {
  SYSTEM_TOOL_PATH,
  closeServer,
  createServiceListener,
  killUserProcesses,
  listen,
  lookupSystemUser,
  removeSystemUser,
  silentLogger,
} from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import type { Json, JsonRequest } from "@stavrobot/common/test-support";
import { isRoot, jsonRequester, makeTempRoot } from "@stavrobot/common/test-support";
import { buildRoutes } from "../src/routes.js";
import type { RunLimits } from "../src/run-spec.js";
import { PythonRunner } from "../src/runner.js";

export { sandboxModes, isRoot, makeTempRoot, processesMatching } from "@stavrobot/common/test-support";
export type { Json } from "@stavrobot/common/test-support";

export const SECRET = "test-internal-secret-0123456789";

/**
 * A stand-in for uv (there is neither uv nor PyPI here): `uv run [--quiet] [--script] FILE` runs
 * FILE with python3. Returns the directory holding it, to put first on the tool PATH.
 */
export function writeUvShim(root: string): string {
  const dir = join(root, "uv-bin");
  mkdirSync(dir, { mode: 0o755 });
  chmodSync(dir, 0o755);
  const script = [
    "#!/bin/sh",
    '[ "$1" = run ] || { echo "uv shim: only run is supported" >&2; exit 2; }',
    'for arg in "$@"; do file="$arg"; done',
    'exec python3 "$file"',
    "",
  ].join("\n");
  writeFileSync(join(dir, "uv"), script, { mode: 0o755 });
  return dir;
}

export interface TestPythonRunner {
  url: string;
  root: string;
  stateDir: string;
  /** Plain mode: where runs take turns (instead of the machine's /tmp/run). */
  plainRunDir: string;
  runner: PythonRunner;
  /** The run user of this runner (a unique one per runner, so tests in parallel never meet). */
  user: string;
  request: JsonRequest;
  /** `POST /run`, expecting 200; returns `{output, files}`. */
  run(
    body: Record<string, unknown>,
  ): Promise<{ output: string; files: { filename: string; data: string }[] }>;
  close(): Promise<void>;
}

export interface TestPythonRunnerOptions {
  plainSandbox?: boolean;
  /** Default: the system directories (python3, no uv). */
  toolPath?: string;
  limits?: Partial<RunLimits>;
  logger?: Logger;
}

/**
 * The python-runner's real domain behind the skeleton's real listener, on a loopback port. Each
 * gets its own run user: plain mode ends every process of its user after a run, which must not
 * reach runs of other test files.
 */
export async function startPythonRunner(options: TestPythonRunnerOptions = {}): Promise<TestPythonRunner> {
  const root = makeTempRoot("python-runner");
  const stateDir = join(root, "state");
  const plainRunDir = join(root, "run");
  const user = `pyrun_${randomBytes(4).toString("hex")}`;
  const runner = await PythonRunner.create({
    stateDir,
    toolPath: options.toolPath ?? SYSTEM_TOOL_PATH,
    plainSandbox: options.plainSandbox ?? false,
    plainRunDir,
    ...(process.env.HOME ? { home: process.env.HOME } : {}),
    limits: { timeoutMs: 10_000, killGraceMs: 200, ...options.limits },
    runUser: user,
    logger: options.logger ?? silentLogger,
  });
  const server: Server = createServer(
    createServiceListener(
      { router: buildRoutes(runner), health: () => ({ ...runner.status() }) },
      SECRET,
      silentLogger,
    ),
  );
  const port = await listen(server, 0);
  const url = `http://127.0.0.1:${port}`;
  const request = jsonRequester(url, SECRET);
  return {
    url,
    root,
    stateDir,
    plainRunDir,
    runner,
    user,
    request,
    async run(body) {
      const answer = await request("POST", "/run", body);
      if (answer.status !== 200)
        throw new Error(`POST /run answered ${answer.status}: ${JSON.stringify(answer.body)}`);
      return answer.body as Json;
    },
    async close() {
      await closeServer(server);
      await runner.settle();
      if (isRoot) await removeUser(user);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Removes a test's run user (after ending whatever it still runs). */
export async function removeUser(name: string): Promise<void> {
  const owner = await lookupSystemUser(name);
  if (owner) await killUserProcesses([owner.uid]);
  await removeSystemUser(name);
}

/** The processes of a user (zombies included, until their parent reaps them). */
export function processesOf(user: string): string[] {
  try {
    return execFileSync("pgrep", ["-u", user], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

export function uniqueMarker(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString("hex")}`;
}
