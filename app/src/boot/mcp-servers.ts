import { mkdir, readFile, rm, stat } from "node:fs/promises";
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
  private timer: NodeJS.Timeout | undefined;
  /** The file's identity, size and time as last read (stat'ed before its text is read). */
  private seen: string | undefined;
  problem: string | undefined;

  constructor(private readonly options: McpConfigWatchOptions) {}

  /**
   * Looks at the file now and then every interval. Polled, not `fs.watch`: the Settings page and
   * editors replace the file (a new inode), which a watch on the old one would miss. Each look
   * compares with the file as it was last read, so a change made at any moment (before the first
   * look, or while a read ran) is read at the next one.
   */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.look(), this.options.intervalMs ?? 1_000);
    this.timer.unref();
    void this.look();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async look(): Promise<void> {
    if ((await this.stamp()) !== this.seen) await this.reread();
  }

  private async stamp(): Promise<string> {
    const info = await stat(this.options.configPath).catch(() => undefined);
    return info ? `${info.ino}:${info.mtimeMs}:${info.size}` : "none";
  }

  /** Reads config.toml now (one reading at a time; the watch calls this on every change). */
  reread(): Promise<void> {
    this.reading = this.reading.then(() => this.read());
    return this.reading;
  }

  private async read(): Promise<void> {
    const { configPath, paths, env, logger } = this.options;
    try {
      this.seen = await this.stamp();
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
