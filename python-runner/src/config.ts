import { delimiter, dirname, resolve } from "node:path";
import { z } from "zod";
import { SYSTEM_TOOL_PATH, which } from "@stavrobot/common";

/** The python-runner's own variables (the skeleton adds HOST, the secret and the log level). */
export const pythonRunnerEnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3004),
  PYTHON_RUNNER_STATE_DIR: z.string().min(1).default("data/python-runner"),
  PYTHON_RUNNER_SANDBOX: z.enum(["auto", "plain"]).default("auto"),
  /** The PATH scripts get; uv and python3 are looked up on it. */
  PYTHON_RUNNER_TOOL_PATH: z.string().min(1).optional(),
  PYTHON_RUNNER_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
  /** A shared, read-only interpreter store (the image's /opt/uv/python). */
  UV_PYTHON_INSTALL_DIR: z.string().min(1).optional(),
  SSL_CERT_FILE: z.string().min(1).optional(),
  PATH: z.string().default(""),
  HOME: z.string().min(1).optional(),
});

export type PythonRunnerEnv = z.infer<typeof pythonRunnerEnvSchema>;

export interface PythonRunnerConfig {
  /** Absolute. */
  stateDir: string;
  plainSandbox: boolean;
  toolPath: string;
  timeoutMs: number;
  uvPythonInstallDir?: string;
  sslCertFile?: string;
  /** The service's HOME: runtimes under it (uv in ~/.local/bin, pyenv) are mounted for scripts. */
  home?: string;
}

/** Resolves the parsed environment into the runner's configuration. */
export function pythonRunnerConfig(env: PythonRunnerEnv): Readonly<PythonRunnerConfig> {
  return Object.freeze({
    stateDir: resolve(env.PYTHON_RUNNER_STATE_DIR),
    plainSandbox: env.PYTHON_RUNNER_SANDBOX === "plain",
    toolPath: env.PYTHON_RUNNER_TOOL_PATH ?? defaultToolPath(env.PATH),
    timeoutMs: env.PYTHON_RUNNER_TIMEOUT_MS,
    ...(env.UV_PYTHON_INSTALL_DIR ? { uvPythonInstallDir: resolve(env.UV_PYTHON_INSTALL_DIR) } : {}),
    ...(env.SSL_CERT_FILE ? { sslCertFile: env.SSL_CERT_FILE } : {}),
    ...(env.HOME ? { home: env.HOME } : {}),
  });
}

/**
 * The directories where the service itself finds uv and python3 (a uv in ~/.local/bin, a pyenv
 * Python), then the system directories, so scripts use the same interpreter the owner installed.
 */
export function defaultToolPath(servicePath: string): string {
  const dirs: string[] = [];
  for (const program of ["uv", "python3"]) {
    const found = which(program, servicePath);
    if (found && !dirs.includes(dirname(found))) dirs.push(dirname(found));
  }
  for (const dir of SYSTEM_TOOL_PATH.split(delimiter)) if (!dirs.includes(dir)) dirs.push(dir);
  return dirs.join(delimiter);
}
