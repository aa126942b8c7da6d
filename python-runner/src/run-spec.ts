import { dirname } from "node:path";
import { PYTHON_FILES_LIMIT_BYTES, runtimeMounts } from "@stavrobot/common";
import type { Mount } from "@stavrobot/common";

const MB = 1024 * 1024;

export interface RunLimits {
  /** Wall time of one run; then SIGTERM to the whole tree, SIGKILL `killGraceMs` later. */
  timeoutMs: number;
  killGraceMs: number;
  stdoutLimitBytes: number;
  stderrLimitBytes: number;
  /** RLIMIT_NPROC of the run user (threads count too): contains fork bombs. */
  processes: number;
  /** RLIMIT_AS. uv and CPython start well below it; numeric libraries get room to work. */
  memoryBytes: number;
  /** RLIMIT_FSIZE: no single file the script writes may be larger. */
  fileSizeBytes: number;
  openFiles: number;
  /** Total size of the files one run hands back. */
  outputFilesBytes: number;
}

export const DEFAULT_LIMITS: RunLimits = {
  timeoutMs: 30_000,
  killGraceMs: 2_000,
  stdoutLimitBytes: MB,
  stderrLimitBytes: 64 * 1024,
  processes: 64,
  memoryBytes: 2048 * MB,
  fileSizeBytes: 25 * MB,
  openFiles: 256,
  outputFilesBytes: PYTHON_FILES_LIMIT_BYTES,
};

/**
 * Threads numeric libraries and uv may start: by default one per CPU, which on a large machine
 * would run into the process limit (threads count) and the address-space limit.
 */
const THREAD_CAPS: Record<string, string> = {
  OMP_NUM_THREADS: "4",
  OPENBLAS_NUM_THREADS: "4",
  MKL_NUM_THREADS: "4",
  NUMEXPR_MAX_THREADS: "4",
  RAYON_NUM_THREADS: "4",
  TOKIO_WORKER_THREADS: "4",
  UV_CONCURRENT_BUILDS: "2",
  UV_CONCURRENT_INSTALLS: "4",
};

/**
 * The whole environment of a script (nothing is inherited from the service): the tool PATH, its
 * own directory as HOME and TMPDIR's parent, unbuffered UTF-8 output (what was printed before a
 * timeout is kept), and uv's cache and interpreters. Without dependencies uv runs offline and with
 * a throw-away cache, so such a run neither reaches the network nor writes to the shared cache.
 */
export function scriptEnv(options: {
  toolPath: string;
  runDir: string;
  cacheDir: string;
  uvPythonInstallDir: string;
  network: boolean;
  sslCertFile?: string | undefined;
}): Record<string, string> {
  return {
    PATH: options.toolPath,
    HOME: options.runDir,
    TMPDIR: `${options.runDir}/tmp`,
    LANG: "C.UTF-8",
    PYTHONUTF8: "1",
    PYTHONUNBUFFERED: "1",
    PYTHONDONTWRITEBYTECODE: "1",
    MPLBACKEND: "Agg",
    UV_PYTHON_INSTALL_DIR: options.uvPythonInstallDir,
    ...(options.network ? { UV_CACHE_DIR: `${options.cacheDir}/uv` } : { UV_NO_CACHE: "1", UV_OFFLINE: "1" }),
    ...(options.sslCertFile ? { SSL_CERT_FILE: options.sslCertFile } : {}),
    ...THREAD_CAPS,
  };
}

/**
 * Read-only mounts that make the tool PATH's runtimes work inside the sandbox (uv in
 * ~/.local/bin, a pyenv Python), plus the shared interpreter store and the certificates.
 */
export function runtimeMountsFor(options: {
  toolPath: string;
  home?: string | undefined;
  uvPythonInstallDir?: string | undefined;
  sslCertFile?: string | undefined;
}): Mount[] {
  const mounts = runtimeMounts(options.toolPath, options.home);
  for (const extra of [options.uvPythonInstallDir, options.sslCertFile && dirname(options.sslCertFile)]) {
    if (extra) mounts.push(...runtimeMounts(extra, options.home));
  }
  return mounts;
}
