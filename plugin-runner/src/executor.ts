import { randomUUID } from "node:crypto";
import { chmod, lchown, lstat, mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger, TransportedFile } from "@stavrobot/common";
import type { Bundle, ToolDef } from "./bundles.js";
import type { ToolEnvConfig } from "./config.js";
import type { Owner } from "./fs-safe.js";
import {
  UnsafePathError,
  chownTree,
  ensureRealDir,
  readFileNoFollow,
  removeTree,
  resolveInside,
} from "./fs-safe.js";
import type { RunOutcome } from "./messages.js";
import type { ProcessResult } from "./process.js";
import { runProcess } from "./process.js";
import type { Isolation } from "./users.js";
import type { ValidatedParams } from "./validate.js";

export interface Limits {
  syncTimeoutMs: number;
  asyncTimeoutMs: number;
  stdoutLimitBytes: number;
  stderrLimitBytes: number;
  /** Total size of the files a run may hand back. */
  outputFilesBytes: number;
  killGraceMs: number;
}

export const DEFAULT_LIMITS: Limits = {
  syncTimeoutMs: 30_000,
  asyncTimeoutMs: 5 * 60_000,
  stdoutLimitBytes: 1024 * 1024,
  stderrLimitBytes: 64 * 1024,
  outputFilesBytes: 25 * 1024 * 1024,
  killGraceMs: 2_000,
};

export interface ExecutorOptions {
  cacheDir: string;
  runsDir: string;
  isolation: Isolation;
  toolEnv: ToolEnvConfig;
  limits: Limits;
  logger: Logger;
}

/** The key the runner adds to a tool's stdin: the directory whose files are returned to the caller. */
export const OUTPUT_DIR_KEY = "_output_dir";

const MAX_OUTPUT_FILES = 100;
const INIT_OUTPUT_CHARS = 8_000;

/**
 * Runs tools and init scripts: as the plugin's own user, in a fresh per-run directory, with an
 * environment that holds nothing of the runner's.
 */
export class Executor {
  /** Plugins already prepared (user, ownership, cache dirs), so a run costs one lstat, not a dozen calls. */
  private readonly prepared = new Map<string, { owner?: Owner; env: Record<string, string> }>();
  private readonly cleanups = new Set<Promise<void>>();
  /** Runs of each plugin in flight (tools, init scripts, git during an update). */
  private readonly inFlight = new Map<string, number>();
  /** Plugins with a run that timed out: their user's processes are killed once none of their runs is left. */
  private readonly sweepsOwed = new Set<string>();
  /** Sweeps under way; a new run of the plugin waits for its sweep, which would otherwise kill it. */
  private readonly sweeps = new Map<string, Promise<void>>();
  private warnedNoSweep = false;

  constructor(private readonly options: ExecutorOptions) {}

  /** Drops what is known about a plugin (before it is removed). */
  forget(plugin: string): void {
    this.prepared.delete(plugin);
  }

  get limits(): Limits {
    return this.options.limits;
  }

  /** The plugin's user (created and given the bundle if needed) and its private cache dirs. */
  async preparePlugin(
    bundleDir: string,
    plugin: string,
  ): Promise<{ owner?: Owner; env: Record<string, string> }> {
    const { isolation, cacheDir, toolEnv } = this.options;
    let owner = await isolation.lookupUser(plugin);
    if (isolation.enabled && !owner) owner = await isolation.ensureUser(plugin);
    if (owner) {
      const info = await lstat(bundleDir);
      if (info.uid !== owner.uid) await chownTree(bundleDir, owner);
      if ((info.mode & 0o777) !== 0o700) await chmod(bundleDir, 0o700);
    }
    const base = join(cacheDir, plugin);
    await ensureRealDir(base, 0o700, owner);
    const home = join(base, "home");
    const uv = join(base, "uv");
    await ensureRealDir(home, 0o700, owner);
    await ensureRealDir(uv, 0o700, owner);
    let python = toolEnv.uvPythonInstallDir;
    if (!python) {
      python = join(base, "python");
      await ensureRealDir(python, 0o700, owner);
    }
    const env: Record<string, string> = {
      PATH: toolEnv.path,
      HOME: home,
      UV_CACHE_DIR: uv,
      UV_PYTHON_INSTALL_DIR: python,
    };
    if (toolEnv.sslCertFile) env.SSL_CERT_FILE = toolEnv.sslCertFile;
    if (toolEnv.requestsCaBundle) env.REQUESTS_CA_BUNDLE = toolEnv.requestsCaBundle;
    const prepared = owner ? { owner, env } : { env };
    this.prepared.set(plugin, prepared);
    return prepared;
  }

  /** The cached preparation while the bundle is still the plugin user's, mode 700; else a full one. */
  private async prepareForRun(bundleDir: string, plugin: string) {
    const cached = this.prepared.get(plugin);
    if (cached) {
      const info = await lstat(bundleDir);
      const owned = cached.owner ? info.uid === cached.owner.uid && (info.mode & 0o777) === 0o700 : true;
      if (owned && info.isDirectory()) return cached;
    }
    return this.preparePlugin(bundleDir, plugin);
  }

  async runTool(
    bundle: Bundle,
    tool: ToolDef,
    params: ValidatedParams,
    timeoutMs: number,
  ): Promise<RunOutcome> {
    const { owner, env } = await this.prepareForRun(bundle.dir, bundle.name);
    const runDir = join(this.options.runsDir, `${bundle.name}-${randomUUID()}`);
    // The run dir stays root's, so the plugin cannot swap `output` for a symlink; it gets the two inside.
    await mkdir(runDir, { mode: owner ? 0o711 : 0o700 });
    try {
      const inputDir = join(runDir, "input");
      const outputDir = join(runDir, "output");
      // The input dir only when there are files to put in it: every filesystem call costs a run time.
      const hasInput = params.files.length > 0;
      if (hasInput) await mkdir(inputDir, { mode: 0o700 });
      await mkdir(outputDir, { mode: 0o700 });
      const stdin: Record<string, unknown> = { ...params.values };
      const used = new Set<string>();
      for (const file of params.files) {
        let name = file.filename;
        for (let n = 2; used.has(name); n++) name = `${n}-${file.filename}`;
        used.add(name);
        const path = join(inputDir, name);
        await writeFile(path, file.data, { mode: 0o600, flag: "wx" });
        if (owner) await lchown(path, owner.uid, owner.gid);
        stdin[file.param] = path;
      }
      if (owner) {
        if (hasInput) await lchown(inputDir, owner.uid, owner.gid);
        await lchown(outputDir, owner.uid, owner.gid);
      }
      stdin[OUTPUT_DIR_KEY] = outputDir;
      const result = await this.spawn(
        bundle.name,
        tool.entrypoint,
        tool.dir,
        env,
        owner,
        JSON.stringify(stdin),
        timeoutMs,
      );
      if (!result.ok) return result.outcome;
      const collected = await this.collectFiles(outputDir, owner);
      return toolSuccess(result.process, this.options.limits, collected);
    } finally {
      // Off the response path: the caller does not wait for the clean-up (settle() does).
      this.removeLater(runDir);
    }
  }

  /** Resolves once every run directory scheduled for removal is gone and every owed sweep is done. */
  async settle(): Promise<void> {
    await Promise.all([...this.cleanups, ...this.sweeps.values()]);
  }

  /**
   * Counts `work` as a run of `plugin` in flight. A timed-out run may leave processes behind that
   * escaped its process group (`setsid`); with isolation they are all the plugin user's, so they are
   * killed (every process of that user) as soon as the plugin has no run in flight: never sooner, or
   * a concurrent, healthy run of the same plugin would be killed with them. Anything else that runs
   * processes as the plugin's user (git during an update) goes through here too.
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
        if (this.sweepsOwed.delete(plugin)) this.sweep(plugin);
      }
    }
  }

  private oweSweep(plugin: string): void {
    if (this.options.isolation.enabled) {
      this.sweepsOwed.add(plugin);
      return;
    }
    if (this.warnedNoSweep) return;
    this.warnedNoSweep = true;
    this.options.logger.warn(
      "A run timed out and isolation is off: processes it started outside its process group (setsid) cannot be found and may keep running. Run the runner as root to have them killed.",
      { plugin },
    );
  }

  private sweep(plugin: string): void {
    const { isolation, logger } = this.options;
    const sweep: Promise<void> = isolation
      .killProcesses(plugin)
      .then(() => logger.info("killed the leftover processes of a timed-out run", { plugin }))
      .catch((error: unknown) =>
        logger.error("could not kill the leftover processes of a timed-out run", {
          plugin,
          error: String(error),
        }),
      )
      .finally(() => this.sweeps.delete(plugin));
    this.sweeps.set(plugin, sweep);
  }

  private removeLater(dir: string): void {
    const removal: Promise<void> = removeTree(dir)
      .catch((error: unknown) =>
        this.options.logger.warn("could not remove run dir", { runDir: dir, error: String(error) }),
      )
      .finally(() => this.cleanups.delete(removal));
    this.cleanups.add(removal);
  }

  /** Runs the bundle's init script (cwd = bundle root); stdout becomes the init output. */
  async runInit(bundle: Bundle, timeoutMs: number): Promise<RunOutcome> {
    if (!bundle.init) return { success: true, output: "" };
    const { owner, env } = await this.preparePlugin(bundle.dir, bundle.name);
    let entrypoint: string;
    try {
      entrypoint = await resolveInside(bundle.dir, bundle.init.entrypoint);
    } catch (error) {
      return { success: false, error: `Invalid init entrypoint: ${(error as Error).message}` };
    }
    const result = await this.spawn(bundle.name, entrypoint, bundle.dir, env, owner, "", timeoutMs);
    if (!result.ok) return result.outcome;
    let output = result.process.stdout.trim();
    if (output.length > INIT_OUTPUT_CHARS)
      output = "…(earlier output omitted)\n" + output.slice(-INIT_OUTPUT_CHARS);
    return { success: true, output };
  }

  private async spawn(
    plugin: string,
    command: string,
    cwd: string,
    env: Record<string, string>,
    owner: Owner | undefined,
    stdin: string,
    timeoutMs: number,
  ): Promise<{ ok: true; process: ProcessResult } | { ok: false; outcome: RunOutcome }> {
    const { limits } = this.options;
    const result = await this.track(plugin, async () => {
      const result = await runProcess({
        command,
        cwd,
        env,
        stdin,
        timeoutMs,
        uid: owner?.uid,
        gid: owner?.gid,
        stdoutLimitBytes: limits.stdoutLimitBytes,
        stderrLimitBytes: limits.stderrLimitBytes,
        killGraceMs: limits.killGraceMs,
      });
      if (result.timedOut) this.oweSweep(plugin);
      return result;
    });
    if (result.spawnError)
      return { ok: false, outcome: { success: false, error: `Failed to start: ${result.spawnError}` } };
    if (result.timedOut) {
      const seconds = Math.round(timeoutMs / 100) / 10;
      return { ok: false, outcome: { success: false, error: `Tool execution timed out after ${seconds} s` } };
    }
    if (result.exitCode !== 0) return { ok: false, outcome: { success: false, error: failureText(result) } };
    return { ok: true, process: result };
  }

  /** Top-level regular files of the output dir, base64, within the size cap; symlinks are ignored. */
  private async collectFiles(
    dir: string,
    owner: Owner | undefined,
  ): Promise<{ files: TransportedFile[]; warnings: string[] }> {
    const files: TransportedFile[] = [];
    const warnings: string[] = [];
    let total = 0;
    const names = (await readdir(dir).catch(() => [] as string[])).sort();
    for (const name of names) {
      if (files.length >= MAX_OUTPUT_FILES) {
        warnings.push(`Only the first ${MAX_OUTPUT_FILES} output files were returned.`);
        break;
      }
      const room = this.options.limits.outputFilesBytes - total;
      try {
        const data = await readFileNoFollow(join(dir, name), room, owner);
        total += data.length;
        files.push({ filename: name, data: data.toString("base64") });
      } catch (error) {
        if (error instanceof UnsafePathError && /larger than/.test(error.message)) {
          warnings.push(`Output file "${name}" was left out: output files may total at most 25 MB.`);
        }
        // Symlinks, directories and other special files are skipped silently.
      }
    }
    return { files, warnings };
  }
}

function failureText(result: ProcessResult): string {
  let text = result.stderr.trim() || result.stdout.trim();
  if (!text) {
    text = result.signal
      ? `Process was killed by ${result.signal}`
      : `Process exited with code ${result.exitCode}`;
  }
  if (result.stderrTruncated || result.stdoutTruncated) text += "\n[output truncated]";
  return text;
}

function toolSuccess(
  result: ProcessResult,
  limits: Limits,
  collected: { files: TransportedFile[]; warnings: string[] },
): RunOutcome {
  const warnings = [...collected.warnings];
  let output: unknown;
  if (result.stdoutTruncated) {
    const limitMb = Math.round((limits.stdoutLimitBytes / 1024 / 1024) * 10) / 10;
    output = `${result.stdout}\n[output truncated: the tool printed more than ${limitMb} MB]`;
    warnings.unshift(`Output truncated: the tool printed more than ${limitMb} MB to stdout.`);
  } else {
    try {
      output = JSON.parse(result.stdout);
    } catch {
      output = result.stdout;
    }
  }
  return {
    success: true,
    output,
    ...(collected.files.length > 0 ? { files: collected.files } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}
