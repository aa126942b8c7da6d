import { chmodSync, existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { dirname } from "node:path";
import TOML from "@iarna/toml";
import type { z } from "zod";
import { describeConfigIssue } from "./config-issues.js";
import { ConfigError } from "./errors.js";

/**
 * Reads a TOML file and validates it with a zod schema. Errors name the file and the key:
 * `Invalid config in data/main/config.toml: key "modle" is not a setting: did you mean "model"?`
 * (config-issues.ts words each problem).
 * The result is deep-frozen: config is parsed once at start-up and never changes after.
 */
export function loadTomlConfig<T extends z.ZodType>(
  path: string,
  schema: T,
  prepare?: PrepareConfig,
): Readonly<z.infer<T>> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError(`Cannot read config file ${path}: ${(error as Error).message}`);
  }
  return parseTomlConfig(text, schema, path, prepare);
}

/**
 * A step between reading the TOML and checking it (the app expands `${VAR}` in its MCP servers):
 * it returns the value to check, or the problems it found, worded as the checks word theirs.
 */
export type PrepareConfig = (raw: unknown) => { value: unknown } | { problems: string[] };

export function parseTomlConfig<T extends z.ZodType>(
  text: string,
  schema: T,
  path = "config",
  prepare?: PrepareConfig,
): Readonly<z.infer<T>> {
  let raw: unknown;
  try {
    raw = TOML.parse(text);
  } catch (error) {
    throw new ConfigError(`Invalid TOML in ${path}${describeTomlError(error)}`);
  }
  if (prepare) {
    const prepared = prepare(raw);
    if ("problems" in prepared)
      throw new ConfigError(`Invalid config in ${path}: ${prepared.problems.join("; ")}`);
    raw = prepared.value;
  }
  // The values written are reported so a problem can say what kind of value it found (never the value).
  const result = schema.safeParse(raw, { reportInput: true });
  if (!result.success) {
    const problems = result.error.issues.map((issue) => describeConfigIssue(issue, schema));
    throw new ConfigError(`Invalid config in ${path}: ${problems.join("; ")}`);
  }
  return deepFreeze(result.data);
}

/**
 * @iarna/toml's error as the owner reads it: where, as line and column (counted from 1), then what
 * is wrong. Its own first line ends in "at row 3, col 9, pos 41:" and is followed by the lines
 * around the mistake, which are left out: they may hold a key or a password.
 */
function describeTomlError(error: unknown): string {
  const { message, line, col } = error as { message?: string; line?: unknown; col?: unknown };
  const first = (message ?? String(error)).split("\n")[0] ?? "";
  const reason = first.replace(/\s+at row \d+, col \d+, pos \d+:?\s*$/, "");
  if (typeof line !== "number" || typeof col !== "number") return `: ${reason}`;
  return `, line ${line + 1}, column ${col + 1}: ${reason}`;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/**
 * The secret that sibling services use to call each other and the app's internal port. It is
 * NOT the owner's password. Resolution order: the `STAVROBOT_INTERNAL_SECRET` variable, else the
 * file (by default `internal-secret` beside config.toml), created with a random value on first
 * start when `create` is set (the app creates it; siblings only read it).
 */
export function resolveInternalSecret(options: {
  env?: NodeJS.ProcessEnv;
  file: string;
  create: boolean;
}): string {
  const env = options.env ?? process.env;
  const fromEnv = env.STAVROBOT_INTERNAL_SECRET?.trim();
  if (fromEnv) return fromEnv;
  if (existsSync(options.file)) {
    const value = readFileSync(options.file, "utf8").trim();
    if (value.length >= 16) return value;
    throw new ConfigError(`Internal secret file ${options.file} is too short (need at least 16 characters)`);
  }
  if (!options.create) {
    throw new ConfigError(
      `No internal secret: set STAVROBOT_INTERNAL_SECRET or STAVROBOT_INTERNAL_SECRET_FILE (looked for ${options.file})`,
    );
  }
  const secret = randomBytes(32).toString("hex");
  mkdirSync(dirname(options.file), { recursive: true });
  writeFileSync(options.file, secret + "\n", { mode: 0o600, flag: "wx" });
  chmodSync(options.file, 0o600);
  return secret;
}

/**
 * True when the module at `moduleUrl` is the script Node was started with. Compares real paths,
 * so a checkout path with spaces or a symlinked path still counts.
 */
export function isMainModule(moduleUrl: string, argv1: string | undefined = process.argv[1]): boolean {
  if (!argv1) return false;
  try {
    return realpathSync(fileURLToPath(moduleUrl)) === realpathSync(argv1);
  } catch {
    return false;
  }
}
