import { chmod, lstat, mkdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import {
  DomainError,
  SerialLock,
  chownTree,
  errorMessage,
  pathExists,
  permissionsSchema,
  readFileNoFollow,
  removeTree,
  writeFileAtomic,
} from "@stavrobot/common";
import type { InstallResponse, Permissions } from "@stavrobot/common";
import type { GitRun } from "./git.js";
import type { InstallProgress } from "./install-jobs.js";
import { GIT_ENV, gitFetch, gitHead, gitResetTo, gitResetToFetched, gitShowFetched } from "./git.js";
import { fetchPlugin } from "./fetch-plugin.js";
import type { Source, SourceStore } from "./sources.js";
import type { NetworkPolicy } from "./network.js";
import { parseInstallUrl } from "./sources.js";
import { parseManifest, pluginManifestSchema } from "./manifest.js";
import {
  mergeConfig,
  missingRequired,
  readConfigValues,
  readPermissionsCopy,
  writeConfigValues,
} from "./plugin-config.js";
import { setUpPlugin } from "./setup.js";
import type { SetupDeps } from "./setup.js";
import type { PackageInstaller, PackageSource } from "./formats/format.js";

export interface LifecycleDeps extends SetupDeps {
  cacheDir: string;
  dataDir: string;
  /** Folder installs (`#path=`), which update by cloning again. */
  sources: SourceStore;
  network: NetworkPolicy;
  /** For `git clone` (as the service itself): PATH, HOME and certificate variables. */
  gitEnv: Record<string, string>;
  gitTimeoutMs: number;
  /** Plugins that come as package files (Osaurus's), installed from an upload or a `.zip` URL. */
  packages: PackageInstaller;
}

/** Install, update, remove, create and configure plugins; one operation at a time. */
export class Lifecycle {
  private readonly lock = new SerialLock();

  constructor(private readonly deps: LifecycleDeps) {}

  /**
   * Installs from a git URL, optionally naming a folder of the repository (`#path=<dir>`).
   * `progress` hears each step as it starts (the install jobs report it to the owner).
   */
  async install(url: string, progress?: InstallProgress): Promise<InstallResponse> {
    if (this.deps.packages.isPackageUrl(url)) {
      progress?.("cloning");
      return this.installPackage(await this.deps.packages.download(url, this.deps.gitTimeoutMs));
    }
    const source = parseInstallUrl(url);
    return this.lock.run(async () => {
      const { pluginsDir } = this.deps;
      progress?.("cloning");
      const fetched = await fetchPlugin(source, this.deps);
      let installed: string | undefined;
      try {
        const name = fetched.plugin.name;
        await this.refuseMcpServer(name);
        if (await pathExists(join(pluginsDir, name)))
          throw new DomainError("conflict", `Plugin "${name}" is already installed.`);
        await rename(fetched.root, join(pluginsDir, name));
        installed = name;
        await this.deps.sources.set(name, source.path ? { url: source.url, path: source.path } : undefined);
        return await this.setUp(name, "installed", progress);
      } catch (error) {
        if (installed) await this.purge(installed);
        throw error;
      } finally {
        await rm(fetched.temp, { recursive: true, force: true });
      }
    });
  }

  /** Installs an Osaurus package (`<plugin_id>-<version>.zip`), downloaded or uploaded by the owner. */
  installPackage(source: PackageSource): Promise<InstallResponse> {
    return this.lock.run(() =>
      this.deps.packages.install(source, {
        refuseMcpServer: (name) => this.refuseMcpServer(name),
        setUp: (name) => this.setUp(name, "installed"),
        purge: (name) => this.purge(name),
      }),
    );
  }

  update(name: string): Promise<InstallResponse> {
    return this.lock.run(async () => {
      await this.refuseMcpServer(name);
      const dir = await this.existingDir(name);
      if ((await this.deps.formats.detect(dir))?.id === "osaurus") {
        throw new DomainError(
          "invalid",
          `Plugin "${name}" is an Osaurus package: remove it and install its new <plugin_id>-<version>.zip.`,
        );
      }
      const source = this.deps.sources.get(name);
      if (source) return this.updateFolder(name, dir, source);
      if (!(await pathExists(join(dir, ".git")))) {
        throw new DomainError(
          "invalid",
          `Plugin "${name}" is editable (not installed from git), so it cannot be updated.`,
        );
      }
      // The code is about to change under them, and nothing of the plugin may race the chown below.
      await this.deps.formats.stop(name);
      await this.deps.isolation.killProcesses(name);
      const timeoutMs = this.deps.gitTimeoutMs;
      // git runs in the plugin's sandbox, as its user, with only its own (plugin-controlled) config.
      const run: GitRun = (args) =>
        this.deps.executor.runGit(
          dir,
          name,
          args,
          { ...GIT_ENV, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
          timeoutMs,
        );
      try {
        await gitFetch(run, timeoutMs);
      } catch (error) {
        throw new DomainError("invalid", `Failed to fetch updates: ${errorMessage(error)}`);
      }
      const format = await this.deps.formats.detect(dir);
      if (format?.id === "stavrobot" || !format) {
        const manifest = await gitShowFetched(run, "manifest.json", timeoutMs);
        try {
          if (manifest === undefined) throw new Error("manifest.json is missing");
          const parsed = parseManifest(Buffer.from(manifest), pluginManifestSchema);
          if (parsed.name !== name) throw new Error(`the manifest now names the plugin "${parsed.name}"`);
        } catch (error) {
          throw new DomainError("invalid", `Update refused, nothing was changed: ${errorMessage(error)}`);
        }
        await gitResetToFetched(run, timeoutMs);
      } else {
        // Other formats are read from the checked-out files: check them there, and go back if they fail.
        const before = (await gitHead(run, timeoutMs)).trim();
        await gitResetToFetched(run, timeoutMs);
        try {
          await this.deps.formats.load({ dir, expectedName: name });
        } catch (error) {
          await gitResetTo(run, before, timeoutMs);
          throw new DomainError("invalid", `Update refused, nothing was changed: ${errorMessage(error)}`);
        }
      }
      this.deps.plugins.invalidate(name);
      return this.setUp(name, "updated");
    });
  }

  /** A folder install: its repository is cloned again and the folder replaced (config.json kept). */
  private async updateFolder(name: string, dir: string, source: Source): Promise<InstallResponse> {
    const fetched = await fetchPlugin(source, this.deps);
    try {
      if (fetched.plugin.name !== name) {
        throw new DomainError(
          "invalid",
          `Update refused, nothing was changed: the plugin is now named "${fetched.plugin.name}"`,
        );
      }
      await this.deps.formats.stop(name);
      await this.deps.isolation.killProcesses(name);
      const config = await readFileNoFollow(join(dir, "config.json"), 1024 * 1024).catch(() => undefined);
      if (config) await writeFileAtomic(join(fetched.root, "config.json"), config.toString("utf8"));
      const old = join(fetched.temp, ".previous");
      await rename(dir, old);
      await rename(fetched.root, dir);
    } finally {
      await rm(fetched.temp, { recursive: true, force: true });
    }
    this.deps.plugins.invalidate(name);
    return this.setUp(name, "updated");
  }

  remove(name: string): Promise<{ message: string }> {
    return this.lock.run(async () => {
      await this.refuseMcpServer(name);
      await this.existingDir(name);
      await this.purge(name);
      return { message: `Plugin "${name}" removed.` };
    });
  }

  create(name: string, description: string): Promise<{ message: string }> {
    return this.lock.run(async () => {
      await this.refuseMcpServer(name);
      const dir = join(this.deps.pluginsDir, name);
      if (await pathExists(dir)) throw new DomainError("conflict", `Plugin "${name}" already exists.`);
      await mkdir(dir, { mode: 0o700 });
      try {
        await writeFileAtomic(
          join(dir, "manifest.json"),
          JSON.stringify({ name, description }, null, 2) + "\n",
        );
        const owner = await this.deps.isolation.ensureUser(name);
        if (owner) await chownTree(dir, owner);
        await chmod(dir, 0o700);
        await this.deps.executor.preparePlugin(dir, name);
        await this.deps.permissions.set(name, ["*"]);
      } catch (error) {
        await this.purge(name);
        throw error;
      }
      this.deps.plugins.invalidate(name);
      return { message: `Plugin '${name}' created successfully.` };
    });
  }

  /**
   * Sets config values (keys the manifest declares; `null` removes one) and, when `permissions` is
   * given, which tools may run. The app's model-facing tool never sends `permissions`: only the
   * owner's settings do.
   */
  configure(name: string, config: Record<string, unknown>): Promise<{ message: string; warnings: string[] }> {
    return this.lock.run(async () => {
      const plugin = await this.deps.plugins.get(name);
      if (!plugin) throw new DomainError("not-found", `Plugin "${name}" not found.`);
      const { logger, permissions } = this.deps;
      const { permissions: requested, ...update } = config;
      let newPermissions: Permissions | undefined;
      if (requested !== undefined) {
        const parsed = permissionsSchema.safeParse(requested);
        if (!parsed.success) {
          throw new DomainError("invalid", 'permissions must be a list of tool names, ["*"] or []');
        }
        newPermissions = parsed.data;
      }
      if (plugin.format === "mcp") {
        // Only the owner's permissions: the server's settings are config.toml's.
        if (Object.keys(update).length > 0 || !newPermissions) throw mcpServerRefusal(name);
        await permissions.set(name, newPermissions);
        return { message: `Configuration of plugin "${name}" updated: permissions.`, warnings: [] };
      }
      if (requested === undefined && Object.keys(update).length === 0 && !plugin.config) {
        throw new DomainError("invalid", "Plugin does not accept configuration.");
      }
      const current = await readConfigValues(plugin.dir, logger);
      const merged = mergeConfig(plugin, current, update);
      if (newPermissions) await permissions.set(name, newPermissions);
      const { owner } = await this.deps.executor.preparePlugin(plugin.dir, name);
      if (merged.keys.length > 0 || newPermissions) {
        await writeConfigValues(plugin.dir, merged.values, permissions.get(name), owner);
      }
      const missing = missingRequired(plugin, merged.values);
      const changed = [...merged.keys, ...(newPermissions ? ["permissions"] : [])];
      return {
        message:
          changed.length > 0
            ? `Configuration of plugin "${name}" updated: ${changed.join(", ")}.`
            : `No configuration of plugin "${name}" was changed.`,
        warnings: missing.map((entry) => `Missing required config key: ${entry.key} (${entry.description})`),
      };
    });
  }

  /** An MCP server is the owner's, in config.toml: no install, update, removal or creation touches its name. */
  private async refuseMcpServer(name: string): Promise<void> {
    if (await this.deps.plugins.isMcpServer(name)) throw mcpServerRefusal(name);
  }

  /** `adopt`, one operation at a time with the others (a plugin put in by hand while the runner runs). */
  adoptExclusive(name: string): Promise<void> {
    return this.lock.run(() => this.adopt(name));
  }

  /**
   * A plugin found on disk at start-up: its permissions come from the service's own store, or, the
   * first time (an install from before, or the reference), from the copy in its config.json.
   */
  async adopt(name: string): Promise<void> {
    const dir = join(this.deps.pluginsDir, name);
    const { permissions, executor } = this.deps;
    const { owner } = await executor.preparePlugin(dir, name);
    if (permissions.has(name)) return;
    await permissions.set(name, (await readPermissionsCopy(dir)) ?? ["*"]);
    const values = await readConfigValues(dir, this.deps.logger);
    await writeConfigValues(dir, values, permissions.get(name), owner);
  }

  /** See setup.ts. */
  private setUp(
    name: string,
    verb: "installed" | "updated",
    progress?: InstallProgress,
  ): Promise<InstallResponse> {
    return setUpPlugin(this.deps, name, verb, progress);
  }

  private async existingDir(name: string): Promise<string> {
    const dir = join(this.deps.pluginsDir, name);
    const info = await lstat(dir).catch(() => undefined);
    if (!info?.isDirectory()) throw new DomainError("not-found", `Plugin "${name}" not found.`);
    return dir;
  }

  /** Removes every trace of a plugin: its processes, directory, cache and user. */
  private async purge(name: string): Promise<void> {
    const { isolation, pluginsDir, cacheDir } = this.deps;
    await this.deps.formats.stop(name);
    await isolation.killProcesses(name);
    this.deps.executor.forget(name);
    this.deps.plugins.invalidate(name);
    await removeTree(join(pluginsDir, name));
    await removeTree(join(cacheDir, name));
    await removeTree(join(this.deps.dataDir, name));
    await this.deps.permissions.remove(name);
    await this.deps.sources.set(name, undefined);
    await this.deps.approvals.remove(name);
    await this.deps.network.remove(name);
    await isolation.removeUser(name);
  }
}

/** What the model (or anyone but the owner's config.toml) is told when it tries to change an MCP server. */
function mcpServerRefusal(name: string): DomainError {
  return new DomainError(
    "conflict",
    `"${name}" is an MCP server the owner declared in config.toml: only the owner can change or remove it, there.`,
  );
}
