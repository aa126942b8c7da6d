import { resolve } from "node:path";
import { z } from "zod";

/** An unset variable and an empty one mean the same: compose writes `KEY=` for "not configured". */
const optionalText = z.preprocess(
  (value) => (value === "" ? undefined : value),
  z.string().min(1).optional(),
);

/** The coder's own variables (the skeleton adds HOST, the internal secret and the log level). */
export const coderEnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3002),
  PLUGINS_DIR: z.string().min(1).default("data/plugins"),
  /** A model alias (`sonnet`, `opus`, `haiku`) or a full model name, passed to `claude --model`. */
  CODER_MODEL: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._:@[\]-]*$/, "a model alias or name such as sonnet")
    .default("sonnet"),
  /** Holds `.credentials.json` from a Claude subscription login (unused with ANTHROPIC_API_KEY). */
  CODER_CREDENTIALS_DIR: z.string().min(1).default("data/coder"),
  /** Private: accepted tasks and the outbox of results. */
  CODER_STATE_DIR: z.string().min(1).default("data/coder-state"),
  CODER_TIMEOUT_MS: z.coerce.number().int().positive().default(600_000),
  CODER_SANDBOX: z.enum(["auto", "plain"]).default("auto"),
  /** A path, or a program name looked up on PATH. */
  CLAUDE_PATH: z.string().min(1).default("claude"),
  APP_INTERNAL_URL: z.url().default("http://127.0.0.1:3001"),
  ANTHROPIC_API_KEY: optionalText,
  ANTHROPIC_BASE_URL: z.preprocess((value) => (value === "" ? undefined : value), z.url().optional()),
  HOME: optionalText,
  /** Where the claude CLI, node and uv are looked for. */
  PATH: z.string().min(1).default("/usr/local/bin:/usr/bin:/bin"),
});

export type CoderEnv = z.infer<typeof coderEnvSchema>;

/** How the coding agent reaches the model. */
export type CoderAuth =
  { kind: "subscription"; credentialsDir: string } | { kind: "api-key"; apiKey: string; baseUrl?: string };

export interface CoderConfig {
  /** Absolute paths. */
  pluginsDir: string;
  stateDir: string;
  model: string;
  timeoutMs: number;
  plainSandbox: boolean;
  claudePath: string;
  searchPath: string;
  appInternalUrl: string;
  home?: string;
  auth: CoderAuth;
}

/** Resolves the parsed environment (relative paths against the working directory at start-up). */
export function coderConfig(env: CoderEnv): Readonly<CoderConfig> {
  const auth: CoderAuth = env.ANTHROPIC_API_KEY
    ? {
        kind: "api-key",
        apiKey: env.ANTHROPIC_API_KEY,
        ...(env.ANTHROPIC_BASE_URL ? { baseUrl: stripApiVersion(env.ANTHROPIC_BASE_URL) } : {}),
      }
    : { kind: "subscription", credentialsDir: resolve(env.CODER_CREDENTIALS_DIR) };
  return Object.freeze({
    pluginsDir: resolve(env.PLUGINS_DIR),
    stateDir: resolve(env.CODER_STATE_DIR),
    model: env.CODER_MODEL,
    timeoutMs: env.CODER_TIMEOUT_MS,
    plainSandbox: env.CODER_SANDBOX === "plain",
    claudePath: env.CLAUDE_PATH,
    searchPath: env.PATH,
    appInternalUrl: env.APP_INTERNAL_URL,
    ...(env.HOME ? { home: env.HOME } : {}),
    auth,
  });
}

/**
 * The CLI appends `/v1/messages` to ANTHROPIC_BASE_URL itself, while the app's own settings name
 * the API root with `/v1` (`https://host/v1`): the suffix is dropped so both can share one value.
 */
export function stripApiVersion(url: string): string {
  return url.replace(/\/+$/, "").replace(/\/v1$/, "");
}
