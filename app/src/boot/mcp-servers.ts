import { unwatchFile, watchFile } from "node:fs";
import { mkdir, readFile, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { MCP_SERVERS_FILE, errorMessage, writeFileAtomic } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import { parseConfig, type AppConfig } from "./config.js";
import type { AppPaths } from "./paths.js";

/** Where the declarations go: `paths.mcpServersFile`, and the secret beside which older versions put them. */
export type McpServersPaths = Pick<AppPaths, "secretFile" | "mcpServersFile">;

/**
 * Hands the owner's `[mcpServers]` to the plugin-runner: the runner never reads config.toml (it
 * holds the owner's password and keys), so the app writes exactly the checked declarations (by
 * plugin name, `${VAR}` expanded), and nothing else, to `paths.mcpServersFile` (MCP_SERVERS_FILE;
 * by default `mcp-servers.json` beside the internal secret, where `npm start`'s runner looks),
 * readable by the owner only. The runner reads it again whenever it changes. Without servers there
 * is no file. Compose keeps it in a directory of its own that only the plugin-runner mounts, so
 * the services that mount the secret's directory cannot read the servers' tokens: a file an older
 * version wrote beside the secret is removed. Returns whether the file changed.
 */
export async function writeMcpServersFile(
  paths: McpServersPaths,
  config: Readonly<AppConfig>,
): Promise<boolean> {
  const path = paths.mcpServersFile;
  const besideSecret = join(dirname(paths.secretFile), MCP_SERVERS_FILE);
  if (besideSecret !== path) await rm(besideSecret, { force: true });
  const servers = config.mcpServers ?? {};
  const before = await readFile(path, "utf8").catch(() => undefined);
  if (Object.keys(servers).length === 0) {
    await rm(path, { force: true });
    return before !== undefined;
  }
  const text = JSON.stringify(servers, null, 2) + "\n";
  if (before === text) return false;
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFileAtomic(path, text, undefined, 0o600);
  return true;
}

export interface McpConfigWatchOptions {
  configPath: string;
  paths: McpServersPaths;
  /** The app's environment, for `${VAR}` in the declarations. */
  env: NodeJS.ProcessEnv;
  logger: Logger;
  /** Told when the declarations handed to the runner changed (the model's plugin list is stale). */
  changed(): void;
  /** How often config.toml is looked at (default 1 s). */
  intervalMs?: number;
}

/**
 * `[mcpServers]` taken from config.toml whenever the file changes, while the app runs (an edit by
 * hand, `npm run mcp:import`, the Settings page): the declarations are written for the runner
 * again, which starts, restarts and stops servers to match. Every other key still takes effect at
 * the next start. A file that cannot be read (bad TOML, a bad key, a `${VAR}` the app's
 * environment lacks) changes nothing: the servers of the last good file keep running, and
 * `problem` says why (the log, the doctor's checks and the Plugins page show it).
 */
export class McpConfigWatch {
  private last: string | undefined;
  private reading: Promise<void> = Promise.resolve();
  private watching = false;
  problem: string | undefined;

  constructor(private readonly options: McpConfigWatchOptions) {}

  start(): void {
    if (this.watching) return;
    this.watching = true;
    // Polled, not fs.watch: the Settings page and editors replace the file (a new inode), which a
    // watch on the old one would miss.
    watchFile(
      this.options.configPath,
      { interval: this.options.intervalMs ?? 1_000, persistent: false },
      (now, before) => {
        if (now.mtimeMs !== before.mtimeMs || now.size !== before.size) void this.reread();
      },
    );
  }

  stop(): void {
    if (!this.watching) return;
    this.watching = false;
    unwatchFile(this.options.configPath);
  }

  /** Reads config.toml now (one reading at a time; the watch calls this on every change). */
  reread(): Promise<void> {
    this.reading = this.reading.then(() => this.read());
    return this.reading;
  }

  private async read(): Promise<void> {
    const { configPath, paths, env, logger } = this.options;
    try {
      const text = await readFile(configPath, "utf8");
      const config = parseConfig(text, configPath, { env, missing: "refuse" });
      this.problem = undefined;
      this.last = undefined;
      if (await writeMcpServersFile(paths, config)) {
        logger.info("config.toml changed: the MCP servers it declares now are handed to the plugin-runner", {
          servers: Object.keys(config.mcpServers ?? {}),
        });
        this.options.changed();
      }
    } catch (error) {
      const message = errorMessage(error);
      this.problem = `config.toml changed but cannot be used (${message}); the MCP servers of the last good version keep running`;
      if (message !== this.last)
        logger.error(
          "config.toml changed but cannot be used; the MCP servers of its last good version keep running",
          {
            error: message,
          },
        );
      this.last = message;
    }
  }
}
