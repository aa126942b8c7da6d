import { rm } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage } from "@stavrobot/common";
import type { Logger, LongLivedProcess, McpServerDeclaration, ProcessExit } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { NetworkPolicy } from "../network.js";
import type { McpGrants } from "./grants.js";
import { grantedRoots, namedMounts, namedPaths } from "./named-paths.js";

/** What starting a stdio server's process needs: the sandbox, the network policy and the write grants. */
export interface LaunchDeps {
  executor: Executor;
  network: NetworkPolicy;
  grants: McpGrants;
  /** The server's logger (its secret values already removed). */
  logger: Logger;
}

/** A stdio server as its launch sees it. */
export interface LaunchedServer {
  name: string;
  /** Its state directory (its HOME). */
  dir: string;
  declaration: McpServerDeclaration;
}

/**
 * Starts a stdio server's process in the plugin sandbox: as its own user, HOME its own state
 * directory, the paths its declaration names shown (named-paths.ts) and writable where they may be
 * (grants.ts), no network when it must have none. Returns the process and the roots it is told
 * (`roots/list`); the MCP handshake over it is the caller's.
 */
export async function launchStdio(
  server: LaunchedServer,
  deps: LaunchDeps,
): Promise<{ child: LongLivedProcess; roots: string[] }> {
  const { executor, network, logger } = deps;
  const { name, dir, declaration } = server;
  const view = { name, dir, network: declaration.network };
  const refusal = network.refusal(view);
  if (refusal) throw new Error(refusal);
  const prepared = await executor.prepareForRun(dir, name);
  const paths = executor.pluginPaths(view, prepared, undefined);
  // The paths its declaration names: shown (namespaces), writable where they may be, for its user.
  const named = await namedPaths(declaration);
  for (const { path, reason } of named.passed)
    logger.warn("a path an MCP server's declaration names is not given to it", {
      server: name,
      path,
      reason,
    });
  await deps.grants.prepare(name, named.paths, prepared.owner);
  const mounts = executor.namespaces ? [...paths.mounts, ...namedMounts(named.paths)] : paths.mounts;
  const child = executor.startKept(
    prepared,
    { ...paths, mounts },
    {
      command: declaration.command as string,
      args: declaration.args.map((arg) => inHome(arg, paths.dataRoot)),
      cwd: declaration.cwd ? inHome(declaration.cwd, paths.dataRoot) : paths.dataRoot,
      env: {
        ...Object.fromEntries(
          Object.entries(declaration.env).map(([key, value]) => [key, inHome(value, paths.dataRoot)]),
        ),
        HOME: paths.dataRoot,
      },
    },
  );
  return { child, roots: grantedRoots(named.paths) };
}

/**
 * `~` and `~/…` in an argument or environment value name the server's own state directory (its
 * HOME, the one place it may write) as the sandbox shows it: `MEMORY_FILE_PATH = "~/memory.json"`.
 */
export function inHome(value: string, home: string): string {
  if (value === "~") return home;
  return value.startsWith("~/") ? `${home}${value.slice(1)}` : value;
}

/**
 * A start stopped while `npx -y` was fetching the package (the product stopped, a timeout) leaves
 * npx's copy half installed, and npx runs that copy from then on, failing the same way each time.
 * Such a copy (named by the failed start's stderr) is removed, so the next try fetches it whole.
 */
export async function forgetHalfInstalledNpx(
  server: Pick<LaunchedServer, "name" | "dir">,
  stderr: string,
  logger: Logger,
): Promise<void> {
  const copy = halfInstalledNpx(stderr);
  if (!copy) return;
  logger.warn("npx's copy of an MCP server's package is incomplete; it is fetched again", {
    server: server.name,
    copy,
  });
  await rm(join(server.dir, ".npm", "_npx", copy), { recursive: true, force: true }).catch((error: unknown) =>
    logger.warn("could not remove npx's incomplete copy", {
      server: server.name,
      error: errorMessage(error),
    }),
  );
}

/**
 * The folder under the server's `~/.npm/_npx/` that a stopped fetch left half installed: a package
 * npx ran while some of its dependencies are missing (Node's "Cannot find package/module …
 * imported from …/_npx/<copy>/…"), or a copy whose packages are in place but whose package.json,
 * written last, is not (npm's "Could not read package.json" for `_npx/<copy>/package.json`).
 */
export function halfInstalledNpx(stderr: string): string | undefined {
  if (/ERR_MODULE_NOT_FOUND|MODULE_NOT_FOUND|Cannot find (package|module)/.test(stderr)) {
    const copy = /\/\.npm\/_npx\/([0-9a-f]{6,64})\/node_modules\//.exec(stderr)?.[1];
    if (copy) return copy;
  }
  if (!/Could not read package\.json/.test(stderr)) return undefined;
  return /\/\.npm\/_npx\/([0-9a-f]{6,64})\/package\.json/.exec(stderr)?.[1];
}

/** How a server's process ended, for its status and the owner. */
export function exitText(exit: ProcessExit): string {
  if (exit.spawnError) return `could not be started: ${exit.spawnError}`;
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}
