import { execFileSync, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { Server } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import { vi } from "vitest";
import { closeServer, listen, silentLogger } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import type { JsonRequest } from "@stavrobot/common/test-support";
import {
  sandboxModes,
  freePort,
  isRoot,
  jsonRequester,
  makeTempRoot,
  startFakeApp,
  uniqueName,
} from "@stavrobot/common/test-support";
import type { Limits } from "../src/limits.js";
import type { PluginHost } from "../src/host.js";
import { createPluginHost } from "../src/host.js";
import { buildServer } from "../src/server.js";

// What the app's tests take from here (they run the real plugin-runner through these helpers).
export { sandboxModes, isRoot, makeTempRoot, startFakeApp, uniqueName };
export type { FakeApp, Json } from "@stavrobot/common/test-support";

export const SECRET = "test-internal-secret-0123456789";

export interface TestPluginHost {
  url: string;
  root: string;
  pluginsDir: string;
  cacheDir: string;
  stateDir: string;
  runsDir: string;
  host: PluginHost;
  request: JsonRequest;
  /** Closes the HTTP server and stops the outbox (files stay on disk). */
  close(): Promise<void>;
}

export interface TestPluginHostOptions {
  root?: string;
  /**
   * Run without namespaces as on a machine without bubblewrap: the sandbox looks for its helpers
   * in a directory that has setpriv and prlimit but no bwrap, and falls back by itself.
   */
  plainSandbox?: boolean;
  /** Where the sandbox looks for bwrap and its helpers (a PATH without bwrap: util-linux unshare). */
  sandboxPath?: string;
  /** Per-plugin users; default: when the tests run as root. */
  isolation?: boolean;
  toolPath?: string;
  appUrl?: string;
  limits?: Partial<Limits>;
  outboxBaseDelayMs?: number;
  logger?: Logger;
  /** The owner's `[plugins] allowWithoutNetworkCut`. */
  allowWithoutNetworkCut?: boolean;
  /** The MCP server declarations file (as the app writes it). */
  mcpServersFile?: string;
  /** Trusted minisign keys for Osaurus packages. */
  osaurusTrustedKeys?: string[];
}

/** The plugin-runner's real domain and routes (its `buildServer`) on a loopback port, with short timings. */
export async function startPluginHost(options: TestPluginHostOptions = {}): Promise<TestPluginHost> {
  const root = options.root ?? makeTempRoot("plugin-runner");
  const dirs = {
    pluginsDir: join(root, "plugins"),
    cacheDir: join(root, "cache"),
    stateDir: join(root, "state"),
    runsDir: join(root, "runs"),
  };
  const host = createPluginHost({
    ...dirs,
    ...(options.plainSandbox ? { sandboxPath: helpersWithoutBwrap(root) } : {}),
    ...(options.sandboxPath ? { sandboxPath: options.sandboxPath } : {}),
    ...(options.isolation !== undefined ? { isolation: options.isolation } : {}),
    ...(options.toolPath ? { toolEnv: { path: options.toolPath } } : {}),
    ...(options.allowWithoutNetworkCut ? { allowWithoutNetworkCut: true } : {}),
    ...(options.mcpServersFile ? { mcpServersFile: options.mcpServersFile } : {}),
    ...(options.osaurusTrustedKeys ? { osaurusTrustedKeys: options.osaurusTrustedKeys } : {}),
    home: process.env.HOME,
    appInternalUrl: options.appUrl ?? "http://127.0.0.1:9",
    secret: SECRET,
    logger: options.logger ?? silentLogger,
    limits: { syncTimeoutMs: 5_000, asyncTimeoutMs: 5_000, killGraceMs: 200, ...options.limits },
    outboxBaseDelayMs: options.outboxBaseDelayMs ?? 100,
    outboxMaxDelayMs: 500,
    gitTimeoutMs: 30_000,
  });
  await host.start();
  const server: Server = createServer(buildServer(host.deps));
  const port = await listen(server, 0);
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    root,
    ...dirs,
    host,
    request: jsonRequester(url, SECRET),
    async close() {
      await closeServer(server);
      await host.stop();
    },
  };
}

/**
 * A directory holding links to this machine's setpriv and prlimit and nothing else: the sandbox
 * finds neither bubblewrap nor what util-linux unshare needs there, so it runs in plain mode.
 */
export function helpersWithoutBwrap(root: string): string {
  const dir = join(root, "sandbox-helpers");
  mkdirSync(dir, { recursive: true });
  for (const tool of ["setpriv", "prlimit"]) {
    const found = execFileSync("/bin/sh", ["-c", `command -v ${tool} || true`], { encoding: "utf8" }).trim();
    if (found && !existsSync(join(dir, tool))) symlinkSync(found, join(dir, tool));
  }
  return dir;
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
  await vi.waitFor(
    () =>
      new Promise<void>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1");
        socket.once("connect", () => {
          socket.destroy();
          resolve();
        });
        socket.once("error", reject);
      }),
    { timeout: 10_000, interval: 50 },
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
