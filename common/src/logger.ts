export type LogLevel = "debug" | "info" | "warn" | "error";

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  child(scope: string): Logger;
}

export function parseLogLevel(value: string | undefined, fallback: LogLevel = "info"): LogLevel {
  return value !== undefined && value in ORDER ? (value as LogLevel) : fallback;
}

/**
 * A levelled logger writing one line per entry to stderr: `time LEVEL [scope] message {fields}`.
 * `STAVROBOT_LOG_LEVEL` picks the threshold when no level is given.
 */
export function createLogger(
  scope: string,
  level: LogLevel = parseLogLevel(process.env.STAVROBOT_LOG_LEVEL),
  write: (line: string) => void = (line) => process.stderr.write(line + "\n"),
): Logger {
  const log = (entryLevel: LogLevel, message: string, fields?: Record<string, unknown>): void => {
    if (ORDER[entryLevel] < ORDER[level]) return;
    const suffix = fields && Object.keys(fields).length > 0 ? " " + safeJson(fields) : "";
    write(`${new Date().toISOString()} ${entryLevel.toUpperCase()} [${scope}] ${message}${suffix}`);
  };
  return {
    debug: (m, f) => log("debug", m, f),
    info: (m, f) => log("info", m, f),
    warn: (m, f) => log("warn", m, f),
    error: (m, f) => log("error", m, f),
    child: (childScope) => createLogger(`${scope}:${childScope}`, level, write),
  };
}

/** A logger that drops everything; handy in tests. */
export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silentLogger,
};

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_key, v: unknown) => (v instanceof Error ? v.message : v));
  } catch {
    return "[unserialisable]";
  }
}
