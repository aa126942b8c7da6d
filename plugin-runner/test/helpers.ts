import { execFileSync, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { Server } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeServer, listen, silentLogger } from "@stavrobot/common";
import type { ChatRequest, Logger } from "@stavrobot/common";
import { freePort, waitFor } from "@stavrobot/common/test-support";
import type { Limits } from "../src/executor.js";
import type { Runner } from "../src/runtime.js";
import { createRunner } from "../src/runtime.js";
import { buildServer } from "../src/server.js";

export const isRoot = process.getuid?.() === 0;
export const SECRET = "test-internal-secret-0123456789";

/** A temp directory plugin users can pass through (mkdtemp makes 0700 directories). */
export function makeTempRoot(prefix: string): string {
  const root = mkdtempSync(join(tmpdir(), `${prefix}-`));
  chmodSync(root, 0o711);
  return root;
}

/** Plugin names are global (they become Unix users), so every test picks unique ones. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString("hex")}`;
}

/** Response bodies in tests: loosely typed so assertions stay readable. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface TestRunner {
  url: string;
  root: string;
  pluginsDir: string;
  cacheDir: string;
  stateDir: string;
  runsDir: string;
  runner: Runner;
  request(
    method: string,
    path: string,
    body?: unknown,
    secret?: string,
  ): Promise<{ status: number; body: Json }>;
  /** Closes the HTTP server and stops the outbox (files stay on disk). */
  close(): Promise<void>;
}

export interface TestRunnerOptions {
  root?: string;
  appUrl?: string;
  limits?: Partial<Limits>;
  outboxBaseDelayMs?: number;
  logger?: Logger;
}

export async function startRunner(options: TestRunnerOptions = {}): Promise<TestRunner> {
  const root = options.root ?? makeTempRoot("plugin-runner");
  const dirs = {
    pluginsDir: join(root, "plugins"),
    cacheDir: join(root, "cache"),
    stateDir: join(root, "state"),
    runsDir: join(root, "runs"),
  };
  const runner = createRunner({
    ...dirs,
    appInternalUrl: options.appUrl ?? "http://127.0.0.1:9",
    secret: SECRET,
    logger: options.logger ?? silentLogger,
    limits: { syncTimeoutMs: 5_000, asyncTimeoutMs: 5_000, killGraceMs: 200, ...options.limits },
    outboxBaseDelayMs: options.outboxBaseDelayMs ?? 100,
    outboxMaxDelayMs: 500,
    gitTimeoutMs: 30_000,
  });
  await runner.start();
  const server: Server = createServer(buildServer(runner.deps));
  const port = await listen(server, 0);
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    root,
    ...dirs,
    runner,
    async request(method, path, body, secret = SECRET) {
      const response = await fetch(url + path, {
        method,
        headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
        body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
      });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // keep text
      }
      return { status: response.status, body: parsed };
    },
    async close() {
      await closeServer(server);
      await runner.stop();
    },
  };
}

export interface ToolSpec {
  name: string;
  script: string;
  manifest?: Record<string, unknown>;
  entrypoint?: string;
}

/** Writes a plugin directory by hand (as root; the runner hands it to the plugin user on first use). */
export function writePlugin(
  parent: string,
  name: string,
  tools: ToolSpec[],
  manifest: Record<string, unknown> = {},
  dirName = name,
): string {
  const dir = join(parent, dirName);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "manifest.json"),
    JSON.stringify({ name, description: `The ${name} plugin`, ...manifest }),
  );
  for (const tool of tools) {
    const toolDir = join(dir, tool.name);
    mkdirSync(toolDir, { recursive: true });
    const entrypoint = tool.entrypoint ?? "run.sh";
    writeFileSync(join(toolDir, entrypoint), tool.script, { mode: 0o755 });
    writeFileSync(
      join(toolDir, "manifest.json"),
      JSON.stringify({
        name: tool.name,
        description: `The ${tool.name} tool`,
        entrypoint,
        parameters: {},
        ...tool.manifest,
      }),
    );
  }
  return dir;
}

export interface FakeApp {
  url: string;
  port: number;
  /** Every `POST /chat` body received, including those answered with an error. */
  messages: ChatRequest[];
  authorizations: (string | undefined)[];
  /** The status answered to each request, in order. */
  answered: number[];
  /** Statuses to answer with, in turn, before answering 200 again; tests may refill or empty it. */
  statuses: number[];
  close(): Promise<void>;
}

/** A stand-in for the app's internal `POST /chat`. */
export async function startFakeApp(port = 0, statuses: number[] = []): Promise<FakeApp> {
  const messages: ChatRequest[] = [];
  const authorizations: (string | undefined)[] = [];
  const answered: number[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/chat") {
        authorizations.push(req.headers.authorization);
        messages.push(JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest);
        const status = statuses.shift() ?? 200;
        answered.push(status);
        const body = status < 300 ? { response: "ok" } : { error: "Unavailable" };
        res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));
      } else {
        res.writeHead(404).end();
      }
    });
  });
  const bound = await listen(server, port);
  return {
    url: `http://127.0.0.1:${bound}`,
    port: bound,
    messages,
    authorizations,
    answered,
    statuses,
    close: () => closeServer(server),
  };
}

export { freePort, waitFor };

/** True when the Unix user exists. */
export function userExists(name: string): boolean {
  try {
    execFileSync("id", [name], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.com", ...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1" },
  });
}

export interface GitDaemon {
  port: number;
  url(repo: string): string;
  stop(): Promise<void>;
}

/** Serves every repository under `base` over git:// on loopback. */
export async function startGitDaemon(base: string): Promise<GitDaemon> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    "git",
    [
      "daemon",
      "--reuseaddr",
      "--export-all",
      `--base-path=${base}`,
      `--port=${port}`,
      "--listen=127.0.0.1",
      base,
    ],
    { stdio: "ignore" },
  );
  await waitFor(
    () =>
      new Promise<boolean>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        socket.once("connect", () => {
          socket.destroy();
          resolve(true);
        });
        socket.once("error", () => resolve(false));
      }),
    10_000,
    "git daemon",
  );
  return {
    port,
    url: (repo) => `git://127.0.0.1:${port}/${repo}`,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
