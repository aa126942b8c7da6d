import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { z } from "zod";
import { ConfigError, formatZodError } from "@stavrobot/common";

/** The PATH tools see: system directories only, never the runner's own (which may point into /root). */
export const DEFAULT_TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3003),
  HOST: z.string().min(1).default("127.0.0.1"),
  PLUGINS_DIR: z.string().min(1).default("data/plugins"),
  PLUGIN_CACHE_DIR: z.string().min(1).default("cache/plugins"),
  PLUGIN_RUNNER_STATE_DIR: z.string().min(1).default("data/plugin-runner"),
  PLUGIN_RUNS_DIR: z.string().min(1).default(join(tmpdir(), "stavrobot-plugin-runs")),
  APP_INTERNAL_URL: z.url().default("http://127.0.0.1:3001"),
  STAVROBOT_INTERNAL_SECRET_FILE: z.string().min(1).default("data/main/internal-secret"),
  PLUGIN_TOOL_PATH: z.string().min(1).default(DEFAULT_TOOL_PATH),
  UV_PYTHON_INSTALL_DIR: z.string().min(1).optional(),
  SSL_CERT_FILE: z.string().min(1).optional(),
  REQUESTS_CA_BUNDLE: z.string().min(1).optional(),
});

export interface RunnerConfig {
  port: number;
  host: string;
  /** Absolute paths. */
  pluginsDir: string;
  cacheDir: string;
  stateDir: string;
  runsDir: string;
  appInternalUrl: string;
  secretFile: string;
  toolEnv: ToolEnvConfig;
}

/** What the runner may put into a tool's environment besides the per-plugin directories. */
export interface ToolEnvConfig {
  path: string;
  /** Shared interpreter store (e.g. /opt/uv/python in the image); per plugin under the cache when unset. */
  uvPythonInstallDir?: string;
  sslCertFile?: string;
  requestsCaBundle?: string;
}

/** Parses the environment once at start-up; the error names the variable and what was expected. */
export function loadConfig(env: NodeJS.ProcessEnv): Readonly<RunnerConfig> {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(`Invalid plugin-runner environment: ${formatZodError(parsed.error)}`);
  }
  const e = parsed.data;
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    pluginsDir: resolve(e.PLUGINS_DIR),
    cacheDir: resolve(e.PLUGIN_CACHE_DIR),
    stateDir: resolve(e.PLUGIN_RUNNER_STATE_DIR),
    runsDir: resolve(e.PLUGIN_RUNS_DIR),
    appInternalUrl: e.APP_INTERNAL_URL,
    secretFile: e.STAVROBOT_INTERNAL_SECRET_FILE,
    toolEnv: Object.freeze({
      path: e.PLUGIN_TOOL_PATH,
      uvPythonInstallDir: e.UV_PYTHON_INSTALL_DIR,
      sslCertFile: e.SSL_CERT_FILE,
      requestsCaBundle: e.REQUESTS_CA_BUNDLE,
    }),
  });
}
