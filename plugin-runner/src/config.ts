import { dirname, join, resolve } from "node:path";
import { z } from "zod";
import { MCP_SERVERS_FILE, SYSTEM_TOOL_PATH } from "@stavrobot/common";
import type { Limits } from "./limits.js";

/** The PATH tools see when none is given: system directories only. */
export const DEFAULT_TOOL_PATH = SYSTEM_TOOL_PATH;

/** The plugin-runner's own variables (the skeleton adds HOST, the secret and the log level). */
export const hostEnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3003),
  PLUGINS_DIR: z.string().min(1).default("data/plugins"),
  PLUGIN_CACHE_DIR: z.string().min(1).default("cache/plugins"),
  PLUGIN_DATA_DIR: z.string().min(1).default("data/plugin-data"),
  PLUGIN_RUNNER_STATE_DIR: z.string().min(1).default("data/plugin-runner"),
  PLUGIN_RUNS_DIR: z.string().min(1).optional(),
  PLUGIN_SANDBOX: z.enum(["auto", "plain"]).default("auto"),
  PLUGIN_ALLOW_WITHOUT_NETWORK_CUT: z.enum(["0", "1", ""]).default(""),
  APP_INTERNAL_URL: z.url().default("http://127.0.0.1:3001"),
  PLUGIN_TOOL_PATH: z.string().min(1).default(DEFAULT_TOOL_PATH),
  UV_PYTHON_INSTALL_DIR: z.string().min(1).optional(),
  SSL_CERT_FILE: z.string().min(1).optional(),
  REQUESTS_CA_BUNDLE: z.string().min(1).optional(),
  HOME: z.string().min(1).optional(),
  /** The owner's MCP servers as the app writes them; default `mcp-servers.json` beside the internal secret. */
  MCP_SERVERS_FILE: z.string().min(1).optional(),
  STAVROBOT_INTERNAL_SECRET_FILE: z.string().min(1).optional(),
  /** How long a tool's (synchronous) run may take, in seconds; default 30 (DEFAULT_LIMITS). */
  PLUGIN_TIMEOUT_SECONDS: z.coerce
    .number()
    .positive()
    .max(80, "must be at most 80: the agent waits 90 s for a tool")
    .optional(),
  /** Trusted minisign public keys for Osaurus packages, separated by commas or white space. */
  PLUGIN_OSAURUS_TRUSTED_KEYS: z.string().default(""),
});

export type HostEnv = z.infer<typeof hostEnvSchema>;

export interface HostConfig {
  /** Absolute paths. */
  pluginsDir: string;
  cacheDir: string;
  dataDir: string;
  stateDir: string;
  runsDir: string;
  plainSandbox: boolean;
  /** Plugins that must not have network run anyway where the sandbox cannot cut it. */
  allowWithoutNetworkCut: boolean;
  appInternalUrl: string;
  home?: string;
  toolEnv: ToolEnvConfig;
  mcpServersFile?: string;
  osaurusTrustedKeys: readonly string[];
  limits?: Partial<Limits>;
}

/** What the runner may put into a tool's environment besides the per-plugin directories. */
export interface ToolEnvConfig {
  path: string;
  /** Shared interpreter store (e.g. /opt/uv/python in the image); per plugin under the cache when unset. */
  uvPythonInstallDir?: string;
  sslCertFile?: string;
  requestsCaBundle?: string;
}

/** Resolves the parsed environment into the host's configuration (relative paths against the cwd). */
export function hostConfig(e: HostEnv): Readonly<HostConfig> {
  const stateDir = resolve(e.PLUGIN_RUNNER_STATE_DIR);
  return Object.freeze({
    pluginsDir: resolve(e.PLUGINS_DIR),
    cacheDir: resolve(e.PLUGIN_CACHE_DIR),
    dataDir: resolve(e.PLUGIN_DATA_DIR),
    stateDir,
    runsDir: e.PLUGIN_RUNS_DIR ? resolve(e.PLUGIN_RUNS_DIR) : join(stateDir, "runs"),
    plainSandbox: e.PLUGIN_SANDBOX === "plain",
    allowWithoutNetworkCut: e.PLUGIN_ALLOW_WITHOUT_NETWORK_CUT === "1",
    appInternalUrl: e.APP_INTERNAL_URL,
    home: e.HOME,
    ...(e.MCP_SERVERS_FILE || e.STAVROBOT_INTERNAL_SECRET_FILE
      ? {
          mcpServersFile: e.MCP_SERVERS_FILE
            ? resolve(e.MCP_SERVERS_FILE)
            : join(dirname(resolve(e.STAVROBOT_INTERNAL_SECRET_FILE as string)), MCP_SERVERS_FILE),
        }
      : {}),
    osaurusTrustedKeys: Object.freeze(e.PLUGIN_OSAURUS_TRUSTED_KEYS.split(/[\s,]+/).filter(Boolean)),
    ...(e.PLUGIN_TIMEOUT_SECONDS ? { limits: { syncTimeoutMs: e.PLUGIN_TIMEOUT_SECONDS * 1000 } } : {}),
    toolEnv: Object.freeze({
      path: e.PLUGIN_TOOL_PATH,
      uvPythonInstallDir: e.UV_PYTHON_INSTALL_DIR,
      sslCertFile: e.SSL_CERT_FILE,
      requestsCaBundle: e.REQUESTS_CA_BUNDLE,
    }),
  });
}
