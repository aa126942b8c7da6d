import { z } from "zod";
import { ConfigError } from "../errors.js";

/** Exit code for a configuration error (EX_CONFIG from sysexits.h). */
export const EXIT_CONFIG = 78;

/** Something this start needs is held by another process: a port, the data directory (EX_UNAVAILABLE). */
export const EXIT_IN_USE = 69;

/** A directory this start must write to is not writable by its user (EX_CANTCREAT). */
export const EXIT_CANNOT_WRITE = 73;

/** Environment every sibling service reads. */
export const baseServiceEnv = z.object({
  PORT: z.coerce.number().int().min(0).max(65535),
  HOST: z.string().min(1).default("127.0.0.1"),
  STAVROBOT_INTERNAL_SECRET: z.string().min(16).optional(),
  STAVROBOT_INTERNAL_SECRET_FILE: z.string().min(1).default("data/main/internal-secret"),
  STAVROBOT_LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
  /**
   * `npm start` gives its siblings the id of the instance that started them; `GET /health` shows
   * it, so the app can tell its own sibling from another instance's on the same port.
   */
  STAVROBOT_INSTANCE_ID: z.string().min(1).optional(),
  /** The variable that sets PORT where this service was started (`npm start`: PLUGIN_RUNNER_PORT…). */
  STAVROBOT_PORT_VARIABLE: z.string().min(1).default("PORT"),
});

/**
 * Parses a service's environment once, at start-up. The error names every variable that is wrong
 * and what was expected: `Invalid python-runner environment: PORT: expected number, got "abc"`.
 */
export function parseEnv<T extends z.ZodType>(
  service: string,
  schema: T,
  env: NodeJS.ProcessEnv,
): z.infer<T> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.slice(0, 10).map((issue) => {
    const variable = issue.path.map(String).join(".");
    const received = variable && env[variable] !== undefined ? `, got ${JSON.stringify(env[variable])}` : "";
    return `${variable || "environment"}: ${issue.message}${received}`;
  });
  throw new ConfigError(`Invalid ${service} environment: ${problems.join("; ")}`);
}
