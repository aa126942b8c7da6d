import { randomUUID } from "node:crypto";
import { chmod, lchown, lstat, mkdir } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative } from "node:path";
import {
  SerialLock,
  chownTree,
  ensureRealDir,
  freshDir,
  removeTree,
  runtimeMounts,
  sanitizeText,
} from "@stavrobot/common";
import type { Logger, LongLivedProcess, Mount, Owner, ProcessResult, Sandbox } from "@stavrobot/common";
import type { ToolEnvConfig } from "./config.js";
import type { RunOutcome } from "./chat-messages.js";
import type { Plugin } from "./formats/format.js";
import type { Limits } from "./limits.js";
import type { Isolation } from "./users.js";

export interface ExecutorDeps {
  cacheDir: string;
  /** Per-plugin persistent data directories (Cyclop One's `data_dir`), one per plugin. */
  dataDir: string;
  /** Whether a plugin's processes have network (the owner's choice over the plugin's declaration). */
  networkOf?: (plugin: Pick<Plugin, "name" | "network">) => boolean;
  /** Namespaces mode: parent of each run's private work directory (mounted at /tmp/<plugin>). */
  runsDir: string;
  /** Plain mode: where the shared `<plugin>` work directory lives (the real /tmp by default). */
  tmpDir?: string;
  isolation: Isolation;
  sandbox: Sandbox;
  toolEnv: ToolEnvConfig;
  /** The runner's HOME: runtimes under it (uv in ~/.local/bin, pyenv) are mounted for tools. */
  home?: string;
  limits: Limits;
  logger: Logger;
}

export interface Prepared {
  owner?: Owner;
  /** Per-plugin cache directory on this machine: HOME, uv's cache and (by default) its Pythons. */
  cache: string;
  /** Per-plugin persistent data directory on this machine. */
  data: string;
}

/** A process to run for a plugin, with paths as the plugin sees them (see `pluginPaths`). */
export interface PluginProcess {
  command: string;
  args?: string[];
  cwd: string;
  stdin: string;
  timeoutMs: number;
  /** Extra environment (git's settings during an update, a format's own variables). */
  env?: Record<string, string>;
  /** Network for this process; default the plugin's (see `ExecutorDeps.networkOf`). */
  network?: boolean;
  /** The error text of a non-zero exit, in the format's words; default stderr then stdout. */
  failure?: (result: ProcessResult) => string;
}

/**
 * Runs tools, init scripts and plugin-side git through the shared sandbox, as the plugin's own
 * user, with the reference's tool contract:
 * - stdin is exactly the parameters the model passed, `file` parameters replaced by paths in
 *   `/tmp/<plugin>/`, where the input files are written;
 * - the output files are the top-level regular files the tool writes (or changes) there;
 * - the directory is empty before and after every run.
 * In namespaces mode every run has a private `/tmp/<plugin>` (its own directory mounted there), so
 * runs of one plugin proceed concurrently; the plugin directory is mounted at `/plugins/<plugin>`
 * and nothing else of the data directory exists. In plain mode the paths are the machine's own and
 * the runs of one plugin take turns, since they share the real `/tmp/<plugin>`.
 */
export class Executor {
  private readonly prepared = new Map<string, Prepared>();
  private readonly cleanups = new Set<Promise<void>>();
  /** Plain mode: one run at a time per plugin (they share /tmp/<plugin>). */
  private readonly turns = new Map<string, SerialLock>();
  /** Runs of each plugin in flight (tools, init scripts, git during an update). */
  private readonly inFlight = new Map<string, number>();
  /** Sweeps under way; a new run of the plugin waits for its sweep, which would otherwise kill it. */
  private readonly sweeps = new Map<string, Promise<void>>();
  private readonly runtimes: Mount[];
  private toolPath: string;
  private warnedNoSweep = false;

  constructor(private readonly deps: ExecutorDeps) {
    this.runtimes = deps.sandbox.mode === "namespaces" ? runtimeMountsFor(deps.toolEnv, deps.home) : [];
    this.toolPath = deps.toolEnv.path;
  }

  /** Whether processes run in namespaces (their own root of mounts) rather than on the machine's paths. */
  get namespaces(): boolean {
    return this.deps.sandbox.mode === "namespaces";
  }

  get limits(): Limits {
    return this.deps.limits;
  }

  /** Replaces the tools' PATH (plain mode: without the directories plugin users cannot reach). */
  useToolPath(path: string): void {
    this.toolPath = path;
  }

  /** Drops what is known about a plugin (before it is removed or replaced). */
  forget(plugin: string): void {
    this.prepared.delete(plugin);
  }

  /** The plugin's user (created and given the plugin if needed) and its private cache dirs. */
  async preparePlugin(pluginDir: string, plugin: string): Promise<Prepared> {
    const { isolation, cacheDir, toolEnv } = this.deps;
    let owner = await isolation.lookupUser(plugin);
    if (isolation.enabled && !owner) owner = await isolation.ensureUser(plugin);
    if (owner) {
      const info = await lstat(pluginDir);
      if (info.uid !== owner.uid) await chownTree(pluginDir, owner);
      if ((info.mode & 0o777) !== 0o700) await chmod(pluginDir, 0o700);
    }
    const cache = join(cacheDir, plugin);
    await ensureRealDir(cache, 0o700, owner);
    for (const sub of ["home", "uv", ...(toolEnv.uvPythonInstallDir ? [] : ["python"])]) {
      await ensureRealDir(join(cache, sub), 0o700, owner);
    }
    const data = join(this.deps.dataDir, plugin);
    await ensureRealDir(data, 0o700, owner);
    const prepared: Prepared = owner ? { owner, cache, data } : { cache, data };
    this.prepared.set(plugin, prepared);
    return prepared;
  }

  /** The cached preparation while the plugin is still the plugin user's, mode 700; else a full one. */
  async prepareForRun(pluginDir: string, plugin: string): Promise<Prepared> {
    const cached = this.prepared.get(plugin);
    if (cached) {
      const info = await lstat(pluginDir);
      const owned = cached.owner ? info.uid === cached.owner.uid && (info.mode & 0o777) === 0o700 : true;
      if (owned && info.isDirectory()) return cached;
    }
    return this.preparePlugin(pluginDir, plugin);
  }

  /**
   * Runs git in the plugin's directory as the plugin's user, inside the sandbox: the repository and
   * its `.git/config` (which can name programs for git to run) belong to the plugin.
   */
  async runGit(
    pluginDir: string,
    plugin: string,
    args: string[],
    env: Record<string, string>,
    timeoutMs: number,
  ): Promise<ProcessResult> {
    const prepared = await this.preparePlugin(pluginDir, plugin);
    // git fetches: the update needs the network whatever the plugin's own setting.
    const pseudo = { name: plugin, dir: pluginDir, network: true };
    const paths = this.pluginPaths(pseudo, prepared, undefined);
    const dir = paths.toSandbox(pluginDir);
    return this.track(plugin, () =>
      this.deps.sandbox.run({
        command: "git",
        args: ["-C", dir, ...args],
        cwd: dir,
        env: { ...paths.env, ...env },
        timeoutMs,
        stdoutLimitBytes: 1024 * 1024,
        stderrLimitBytes: 64 * 1024,
        killGraceMs: this.deps.limits.killGraceMs,
        mounts: paths.mounts,
        ...(prepared.owner ? { user: prepared.owner } : {}),
      }),
    );
  }

  /** Resolves once every run directory scheduled for removal is gone and every sweep is done. */
  async settle(): Promise<void> {
    await Promise.all([...this.cleanups, ...this.sweeps.values()]);
  }

  /**
   * Counts `work` as a run of `plugin` in flight. In plain mode with per-plugin users, whatever a
   * run left behind outside its process group (a `setsid` daemon) is killed as soon as the plugin
   * has no run in flight: never sooner, or a concurrent, healthy run would be killed with it. (In
   * namespaces mode the kernel ends a run's every process when the run ends.)
   */
  async track<T>(plugin: string, work: () => Promise<T>): Promise<T> {
    for (let sweep = this.sweeps.get(plugin); sweep; sweep = this.sweeps.get(plugin)) await sweep;
    this.inFlight.set(plugin, (this.inFlight.get(plugin) ?? 0) + 1);
    try {
      return await work();
    } finally {
      const left = (this.inFlight.get(plugin) ?? 1) - 1;
      if (left > 0) this.inFlight.set(plugin, left);
      else {
        this.inFlight.delete(plugin);
        this.afterLastRun(plugin);
      }
    }
  }

  private afterLastRun(plugin: string): void {
    const { isolation, sandbox, logger } = this.deps;
    if (sandbox.mode === "namespaces") return;
    if (!isolation.enabled) {
      if (!this.warnedNoSweep) {
        this.warnedNoSweep = true;
        logger.warn(
          "Plain sandbox without per-plugin users: processes a tool leaves running (setsid, daemons) cannot be told from others and may keep running. Run the runner as root, or with bubblewrap, to have them ended.",
          { plugin },
        );
      }
      return;
    }
    const sweep: Promise<void> = isolation
      .killProcesses(plugin)
      .catch((error: unknown) =>
        logger.error("could not end the leftover processes of a plugin", { plugin, error: String(error) }),
      )
      .finally(() => this.sweeps.delete(plugin));
    this.sweeps.set(plugin, sweep);
  }

  /**
   * The directory a run sees as `/tmp/<plugin>`: its own fresh one in namespaces mode; the real,
   * shared one in plain mode, where the plugin's runs take turns. Empty before and after.
   */
  async withWorkDir<T>(
    plugin: string,
    owner: Owner | undefined,
    work: (dir: { host: string; visible: string }) => Promise<T>,
  ): Promise<T> {
    if (this.deps.sandbox.mode === "namespaces") {
      const host = join(this.deps.runsDir, `${plugin}-${randomUUID()}`);
      await mkdir(host, { mode: 0o700 });
      if (owner) await lchown(host, owner.uid, owner.gid);
      try {
        return await work({ host, visible: `/tmp/${plugin}` });
      } finally {
        this.removeLater(host);
      }
    }
    let turn = this.turns.get(plugin);
    if (!turn) this.turns.set(plugin, (turn = new SerialLock()));
    return turn.run(async () => {
      const host = join(this.deps.tmpDir ?? "/tmp", plugin);
      await mkdir(dirname(host), { recursive: true });
      // The shared /tmp: anyone may have planted a symlink or a directory at the path.
      await freshDir(host, 0o700, owner);
      try {
        return await work({ host, visible: host });
      } finally {
        await removeTree(host).catch((error: unknown) =>
          this.deps.logger.warn("could not empty a plugin's work dir", { plugin, error: String(error) }),
        );
      }
    });
  }

  /** Environment, mounts and path mapping for one plugin's processes in the current mode. */
  pluginPaths(
    plugin: Pick<Plugin, "name" | "dir" | "network">,
    prepared: Prepared,
    workHost: string | undefined,
  ) {
    const { toolEnv } = this.deps;
    const namespaces = this.deps.sandbox.mode === "namespaces";
    const pluginRoot = namespaces ? `/plugins/${plugin.name}` : plugin.dir;
    const cacheRoot = namespaces ? `/cache/${plugin.name}` : prepared.cache;
    const dataRoot = namespaces ? `/plugin-data/${plugin.name}` : prepared.data;
    const env: Record<string, string> = {
      PATH: this.toolPath,
      HOME: `${cacheRoot}/home`,
      UV_CACHE_DIR: `${cacheRoot}/uv`,
      UV_PYTHON_INSTALL_DIR: toolEnv.uvPythonInstallDir ?? `${cacheRoot}/python`,
    };
    if (toolEnv.sslCertFile) env.SSL_CERT_FILE = toolEnv.sslCertFile;
    if (toolEnv.requestsCaBundle) env.REQUESTS_CA_BUNDLE = toolEnv.requestsCaBundle;
    const mounts: Mount[] = namespaces
      ? [
          ...this.runtimes,
          { source: plugin.dir, target: pluginRoot, writable: true },
          { source: prepared.cache, target: cacheRoot, writable: true },
          { source: prepared.data, target: dataRoot, writable: true },
          ...(workHost ? [{ source: workHost, target: `/tmp/${plugin.name}`, writable: true }] : []),
        ]
      : [];
    const toSandbox = (hostPath: string): string => {
      if (!namespaces) return hostPath;
      const rel = relative(plugin.dir, hostPath);
      if (rel.startsWith("..") || isAbsolute(rel)) throw new Error(`${hostPath} is outside the plugin`);
      return rel ? `${pluginRoot}/${rel}` : pluginRoot;
    };
    const network = this.deps.networkOf ? this.deps.networkOf(plugin) : plugin.network;
    return { env, mounts, toSandbox, pluginRoot, cacheRoot, dataRoot, network };
  }

  async spawn(
    plugin: string,
    prepared: Prepared,
    paths: { env: Record<string, string>; mounts: Mount[]; network: boolean },
    process: PluginProcess,
  ): Promise<{ ok: true; process: ProcessResult } | { ok: false; outcome: RunOutcome }> {
    const { limits, sandbox } = this.deps;
    const result = await this.track(plugin, () =>
      sandbox.run({
        command: process.command,
        ...(process.args ? { args: process.args } : {}),
        cwd: process.cwd,
        env: { ...paths.env, ...process.env },
        stdin: process.stdin,
        timeoutMs: process.timeoutMs,
        stdoutLimitBytes: limits.stdoutLimitBytes,
        stderrLimitBytes: limits.stderrLimitBytes,
        killGraceMs: limits.killGraceMs,
        mounts: paths.mounts,
        network: process.network ?? paths.network,
        limits: { processes: limits.processes },
        ...(prepared.owner ? { user: prepared.owner } : {}),
      }),
    );
    if (result.spawnError) {
      return {
        ok: false,
        outcome: { success: false, error: this.tidy(`Failed to start: ${result.spawnError}`) },
      };
    }
    if (result.timedOut) {
      const seconds = Math.round(process.timeoutMs / 100) / 10;
      return { ok: false, outcome: { success: false, error: `Tool execution timed out after ${seconds} s` } };
    }
    if (result.exitCode !== 0)
      return {
        ok: false,
        outcome: { success: false, error: this.tidy((process.failure ?? failureText)(result)) },
      };
    return { ok: true, process: result };
  }

  /**
   * Starts a plugin's long-lived process (a Workbench host) as its runs are started: its user, its
   * mounts and network, the process limit; no timeout of its own (its caller bounds every call).
   */
  startKept(
    prepared: Prepared,
    paths: { env: Record<string, string>; mounts: Mount[]; network: boolean },
    process: { command: string; args: string[]; cwd: string; env?: Record<string, string> },
  ): LongLivedProcess {
    return this.deps.sandbox.start({
      command: process.command,
      args: process.args,
      cwd: process.cwd,
      env: { ...paths.env, ...process.env },
      mounts: paths.mounts,
      network: paths.network,
      limits: { processes: this.deps.limits.processes },
      stderrTailBytes: this.deps.limits.stderrLimitBytes,
      ...(prepared.owner ? { user: prepared.owner } : {}),
    });
  }

  /** Error texts for the model: storable text, and no host paths of temporary directories. */
  tidy(text: string): string {
    let out = sanitizeText(text);
    for (const dir of [this.deps.runsDir, this.deps.cacheDir, this.deps.dataDir])
      out = out.split(dir + "/").join("");
    return out;
  }

  private removeLater(dir: string): void {
    const removal: Promise<void> = removeTree(dir)
      .catch((error: unknown) =>
        this.deps.logger.warn("could not remove run dir", { runDir: basename(dir), error: String(error) }),
      )
      .finally(() => this.cleanups.delete(removal));
    this.cleanups.add(removal);
  }
}

function runtimeMountsFor(toolEnv: ToolEnvConfig, home: string | undefined): Mount[] {
  const mounts = runtimeMounts(toolEnv.path, home);
  for (const extra of [toolEnv.uvPythonInstallDir, toolEnv.sslCertFile && dirname(toolEnv.sslCertFile)]) {
    if (extra) mounts.push(...runtimeMounts(extra, home));
  }
  return mounts;
}

/** stderr and stdout of a failed run (the reference's contract), or how it ended. */
function failureText(result: ProcessResult): string {
  const parts = [result.stderr.trim(), result.stdout.trim()].filter((part) => part.length > 0);
  let text = parts.join("\n");
  if (!text) {
    text = result.signal
      ? `Process was killed by ${result.signal}`
      : `Process exited with code ${result.exitCode}`;
  }
  if (result.stderrTruncated || result.stdoutTruncated) text += "\n[output truncated]";
  return text;
}
