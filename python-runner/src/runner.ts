import { chmod, mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  DomainError,
  PYTHON_FILES_LIMIT_BYTES,
  PYTHON_MAX_FILES,
  Sandbox,
  ensureRealDir,
  ensureSystemUser,
  firstClosedAncestor,
  pathReachableBy,
  killUserProcesses,
  removeTree,
  which,
} from "@stavrobot/common";
import type {
  Logger,
  Mount,
  Owner,
  PythonRunInput,
  PythonRunResponse,
  SandboxRun,
  SandboxStatus,
} from "@stavrobot/common";
import type { RunDir } from "./run-dir.js";
import { RunDirs } from "./run-dir.js";
import type { RunLimits } from "./run-spec.js";
import { DEFAULT_LIMITS, runtimeMountsFor, scriptEnv } from "./run-spec.js";
import { buildScript, formatOutput } from "./script.js";

/** The one unprivileged user every script runs as when the service is root. */
export const RUN_USER = "pythonrunner";

/**
 * Plain mode ends every process of the run user after each run, pass after pass until one finds
 * none (a fork bomb's stragglers need more passes than a daemon).
 */
const SWEEP_PASSES = 20;

export interface PythonRunnerOptions {
  /** The service's private state: run directories and uv's cache. Absolute. */
  stateDir: string;
  /** The PATH scripts get; uv and python3 are looked up on it. */
  toolPath: string;
  plainSandbox?: boolean;
  /** Plain mode: the directory runs take turns in (default /tmp/run, the path scripts are told). */
  plainRunDir?: string;
  /** A shared interpreter store (read-only for runs); default `<stateDir>/cache/python`. */
  uvPythonInstallDir?: string;
  sslCertFile?: string;
  /** The service's HOME: runtimes under it (uv in ~/.local/bin, pyenv) are mounted for scripts. */
  home?: string;
  limits?: Partial<RunLimits>;
  /** The unprivileged user runs switch to when the service is root (tests use their own). */
  runUser?: string;
  logger: Logger;
}

export interface PythonRunnerStatus {
  sandbox: SandboxStatus;
  /** Whether dependencies can be installed (uv was found on the tool PATH). */
  uv: boolean;
}

/** What `create` prepares once for every run. */
interface Parts {
  limits: RunLimits;
  dirs: RunDirs;
  interpreter: { uv?: string | undefined; python?: string | undefined };
  /** uv's cache and (unless shared) its interpreters, the run user's. */
  cacheDir: string;
  /** The run user, when runs switch to it (the service is root). */
  owner: Owner | undefined;
  /** Namespaces mode: the runtimes of the tool PATH, read-only. */
  runtimes: Mount[];
  /** The PATH scripts get (plain mode: what the run user can reach of the configured one). */
  toolPath: string;
}

/** Where the cache is seen from inside the sandbox (namespaces mode). */
const VISIBLE_CACHE_DIR = "/cache";

/**
 * Runs one Python script per request, as the unprivileged `pythonrunner` user (when the service is
 * root) through the shared sandbox, in a fresh directory of its own, and answers with the
 * reference's output text and the files the script wrote to `output/`.
 */
export class PythonRunner {
  readonly sandbox: Sandbox;
  private readonly options: PythonRunnerOptions;
  private readonly parts: Parts;

  private constructor(options: PythonRunnerOptions, sandbox: Sandbox, parts: Parts) {
    this.options = options;
    this.sandbox = sandbox;
    this.parts = parts;
  }

  /** Prepares the state directory and the run user, and probes the sandbox once. */
  static async create(options: PythonRunnerOptions): Promise<PythonRunner> {
    const { logger, stateDir } = options;
    const runUser = options.runUser ?? RUN_USER;
    const owner = process.getuid?.() === 0 ? await ensureSystemUser(runUser, logger) : undefined;
    const sandbox = Sandbox.create({
      logger: logger.child("sandbox"),
      disableNamespaces: options.plainSandbox,
    });
    const namespaces = sandbox.mode === "namespaces";
    // Plain mode: what a run of a previous process left behind (it died before its sweep).
    if (!namespaces && owner) await killUserProcesses([owner.uid], SWEEP_PASSES);
    // The state dir (the operator's: a symlink there is followed) is passable, since plain-mode
    // runs reach the cache through it; its runs are root's alone.
    await mkdir(stateDir, { recursive: true });
    await chmod(stateDir, 0o711);
    const runsDir = join(stateDir, "runs");
    await ensureRealDir(runsDir, 0o700);
    // A previous process may have died before removing its runs.
    for (const name of await readdir(runsDir)) await removeTree(join(runsDir, name));
    const cacheDir = join(stateDir, "cache");
    await ensureRealDir(cacheDir, 0o700, owner);
    for (const sub of ["uv", "python"]) await ensureRealDir(join(cacheDir, sub), 0o700, owner);
    // Without namespaces a run uses this machine's paths: its interpreter must be one the run
    // user can reach (not a pyenv shim in a mode-700 home when /usr/bin/python3 exists).
    const reachable = !namespaces && owner ? await pathReachableBy(options.toolPath, owner) : undefined;
    const toolPath = reachable?.path ?? options.toolPath;
    const interpreter = { uv: which("uv", toolPath), python: which("python3", toolPath) };
    const dirs = new RunDirs({
      runsDir,
      plainRunDir: options.plainRunDir ?? "/tmp/run",
      namespaces,
      ...(owner ? { owner } : {}),
      logger,
    });
    const limits = { ...DEFAULT_LIMITS, ...options.limits };
    logger.info("python-runner ready", {
      sandbox: sandbox.mode,
      user: owner ? runUser : "(this process's)",
      uv: interpreter.uv ?? "(not found: dependencies are refused)",
      python3: interpreter.python ?? "(not found)",
    });
    if (!namespaces) {
      logger.warn(
        "Plain sandbox: scripts keep network access even without dependencies (network removal is not enforced).",
      );
      if (reachable && reachable.dropped.length > 0) {
        logger.warn(
          `Plain sandbox: the run user cannot pass through to ${reachable.dropped.join(", ")}, so scripts ` +
            "use the programs found further on the PATH instead.",
        );
      }
      if (owner)
        await warnUnreachable([join(cacheDir, "uv"), interpreter.uv ?? interpreter.python], owner, logger);
    }
    const runtimes = namespaces ? runtimeMountsFor(options) : [];
    return new PythonRunner(options, sandbox, {
      limits,
      dirs,
      interpreter,
      cacheDir,
      owner,
      runtimes,
      toolPath,
    });
  }

  status(): PythonRunnerStatus {
    return { sandbox: this.sandbox.status, uv: this.parts.interpreter.uv !== undefined };
  }

  async run(input: PythonRunInput): Promise<PythonRunResponse> {
    const dependencies = input.dependencies ?? [];
    const files = input.files ?? [];
    if (dependencies.length > 0 && !this.parts.interpreter.uv) {
      throw new DomainError(
        "invalid",
        "Dependencies need uv, which is not installed where the python-runner runs. " +
          "Run the code without dependencies (the standard library only), or install uv (https://docs.astral.sh/uv/).",
      );
    }
    const total = files.reduce((sum, file) => sum + file.data.length, 0);
    if (total > PYTHON_FILES_LIMIT_BYTES) {
      throw new DomainError(
        "too-large",
        `Input files total ${total} bytes; at most ${PYTHON_FILES_LIMIT_BYTES} are allowed.`,
      );
    }
    return this.parts.dirs.with(async (dir) => {
      await this.parts.dirs.fill(dir, buildScript(input.code, dependencies), files);
      const result = await this.sandbox.run(this.spec(dir, dependencies.length > 0));
      // Plain mode: whatever the run left behind (setsid, a fork bomb's stragglers) ends here,
      // before its output is read; in namespaces mode the kernel already ended it with the run.
      if (this.sandbox.mode === "plain" && this.parts.owner) {
        await killUserProcesses([this.parts.owner.uid], SWEEP_PASSES);
      }
      const collected = await this.parts.dirs.collect(
        dir,
        PYTHON_MAX_FILES,
        this.parts.limits.outputFilesBytes,
      );
      return { output: formatOutput(result, this.parts.limits, collected.notes), files: collected.files };
    });
  }

  /** Resolves once finished runs' directories are removed (done after answering). */
  settle(): Promise<void> {
    return this.parts.dirs.settle();
  }

  /** The sandbox run of one script: uv when it is installed, else plain python3. */
  private spec(dir: RunDir, network: boolean): SandboxRun {
    const { uv, python } = this.parts.interpreter;
    const script = `${dir.visible}/script.py`;
    const namespaces = this.sandbox.mode === "namespaces";
    const cache = namespaces ? VISIBLE_CACHE_DIR : this.parts.cacheDir;
    const limits = this.parts.limits;
    return {
      command: uv ?? python ?? "python3",
      args: uv ? ["run", "--quiet", "--script", script] : [script],
      cwd: dir.visible,
      env: scriptEnv({
        toolPath: this.parts.toolPath,
        runDir: dir.visible,
        cacheDir: cache,
        uvPythonInstallDir: this.options.uvPythonInstallDir ?? `${cache}/python`,
        network,
        sslCertFile: this.options.sslCertFile,
      }),
      timeoutMs: limits.timeoutMs,
      killGraceMs: limits.killGraceMs,
      stdoutLimitBytes: limits.stdoutLimitBytes,
      stderrLimitBytes: limits.stderrLimitBytes,
      network,
      limits: {
        processes: limits.processes,
        memoryBytes: limits.memoryBytes,
        fileSizeBytes: limits.fileSizeBytes,
        openFiles: limits.openFiles,
      },
      mounts: namespaces
        ? [
            ...this.parts.runtimes,
            { source: dir.host, target: dir.visible, writable: true },
            // Packages are fetched (and cached) only for runs that name dependencies.
            { source: this.parts.cacheDir, target: VISIBLE_CACHE_DIR, writable: network },
          ]
        : [],
      ...(this.parts.owner ? { user: this.parts.owner } : {}),
    };
  }
}

/** Plain mode: paths the run user must reach on the machine's own file system. */
async function warnUnreachable(
  paths: readonly (string | undefined)[],
  owner: Owner,
  logger: Logger,
): Promise<void> {
  for (const path of paths) {
    const closed = path && (await firstClosedAncestor(path, owner));
    if (closed) {
      logger.warn(
        `Plain sandbox: the run user cannot pass through ${closed}, so ${path} will fail for scripts.`,
      );
    }
  }
}
