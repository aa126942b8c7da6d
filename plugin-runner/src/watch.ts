import { watch } from "node:fs";
import type { FSWatcher } from "node:fs";
import { lstat, readdir, rename } from "node:fs/promises";
import { join } from "node:path";
import { PLUGIN_NAME_PATTERN, errorMessage } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import type { ApprovalStore } from "./approvals.js";
import type { Formats } from "./formats/index.js";
import type { Lifecycle } from "./lifecycle.js";
import type { PluginStore } from "./plugins.js";

export interface PluginWatcherDeps {
  pluginsDir: string;
  formats: Formats;
  plugins: PluginStore;
  lifecycle: Pick<Lifecycle, "adoptExclusive">;
  approvals: ApprovalStore;
  logger: Logger;
  /** Changes closer together than this are one scan (Cyclop One waits 0.5 s too). */
  debounceMs?: number;
}

/**
 * Plugins put into (or taken out of) the plugins directory by hand are picked up, as Cyclop One
 * does: the directory is watched, and each change scans it. A new plugin gets its user, its files
 * and its permissions (as at start-up), and the owner is told if it waits for approval; a folder
 * whose name is not a valid plugin name (Workbench's `hello_world`) is renamed to the plugin's name
 * when that is free; a plugin that disappeared has its processes stopped.
 */
export class PluginWatcher {
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> = Promise.resolve();
  private readonly known = new Set<string>();

  constructor(private readonly deps: PluginWatcherDeps) {}

  /** Starts watching; `known` are the plugins already adopted. */
  start(known: readonly string[]): void {
    for (const name of known) this.known.add(name);
    try {
      this.watcher = watch(this.deps.pluginsDir, () => this.schedule());
      this.watcher.on("error", (error) =>
        this.deps.logger.warn("plugins directory watch failed", { error: String(error) }),
      );
    } catch (error) {
      this.deps.logger.warn(
        "cannot watch the plugins directory; plugins added by hand are seen at the next start",
        {
          error: errorMessage(error),
        },
      );
    }
  }

  stop(): void {
    this.watcher?.close();
    clearTimeout(this.timer);
  }

  /** Resolves once the scans asked for so far are done (tests). */
  async settle(): Promise<void> {
    while (this.timer) await new Promise((resolve) => setTimeout(resolve, 20));
    await this.scanning;
  }

  private schedule(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.scanning = this.scanning.then(() => this.scan());
    }, this.deps.debounceMs ?? 500);
  }

  /** One pass over the directory (also run at start-up, after the plugins found there were adopted). */
  async scan(): Promise<void> {
    const { pluginsDir, plugins, approvals, logger } = this.deps;
    try {
      const entries = await readdir(pluginsDir, { withFileTypes: true });
      const present = new Set<string>();
      for (const entry of entries) {
        if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
        const name = PLUGIN_NAME_PATTERN.test(entry.name) ? entry.name : await this.rename(entry.name);
        if (!name) continue;
        present.add(name);
        if (!this.known.has(name)) {
          this.known.add(name);
          plugins.invalidate(name);
          await this.deps.lifecycle.adoptExclusive(name);
          logger.info("picked up a plugin put into the plugins directory", { plugin: name });
        }
        const plugin = await plugins.get(name);
        if (plugin) await approvals.announce(plugin);
      }
      for (const name of [...this.known]) {
        if (present.has(name)) continue;
        this.known.delete(name);
        plugins.invalidate(name);
        await this.deps.formats.stop(name);
        logger.info("a plugin left the plugins directory", { plugin: name });
      }
    } catch (error) {
      logger.error("could not scan the plugins directory", { error: errorMessage(error) });
    }
  }

  /** A folder named unlike a plugin: renamed to its plugin's name when it holds one and the name is free. */
  private async rename(folder: string): Promise<string | undefined> {
    const { pluginsDir, formats, logger } = this.deps;
    const dir = join(pluginsDir, folder);
    try {
      const name = (await formats.load({ dir, fallbackName: folder })).plugin.name;
      if (await lstat(join(pluginsDir, name)).catch(() => undefined)) {
        logger.warn("a folder in the plugins directory names a plugin that exists already; left as it is", {
          folder,
          plugin: name,
        });
        return undefined;
      }
      await rename(dir, join(pluginsDir, name));
      logger.info("renamed a plugin folder to its plugin's name", { folder, plugin: name });
      return name;
    } catch (error) {
      logger.warn("a folder in the plugins directory holds no usable plugin", {
        folder,
        error: errorMessage(error),
      });
      return undefined;
    }
  }
}
