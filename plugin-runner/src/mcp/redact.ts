import type { Logger } from "@stavrobot/common";

/** What a secret value becomes wherever it would have been shown. */
export const HIDDEN = "[secret]";

/**
 * Removes secret values (a server's `env` and `headers` values) from text before it reaches a
 * log, the model or an API answer: a server that prints its token in an error message, or a
 * failing command line, must not carry it out. Values shorter than four characters are not
 * secrets worth hiding (and would blank ordinary words).
 */
export class Redactor {
  private readonly secrets: string[];

  constructor(values: Iterable<string>) {
    this.secrets = [...new Set([...values].filter((value) => value.length >= 4))].sort(
      (a, b) => b.length - a.length,
    );
  }

  text(value: string): string {
    let out = value;
    for (const secret of this.secrets) out = out.split(secret).join(HIDDEN);
    return out;
  }

  /** Every string inside a JSON value. */
  deep<T>(value: T): T {
    if (this.secrets.length === 0) return value;
    if (typeof value === "string") return this.text(value) as T;
    if (Array.isArray(value)) return value.map((item) => this.deep(item)) as T;
    if (value && typeof value === "object") {
      return Object.fromEntries(
        Object.entries(value).map(([key, item]) => [this.text(key), this.deep(item)]),
      ) as T;
    }
    return value;
  }

  /** A logger whose messages and fields pass through this redactor. */
  logger(inner: Logger): Logger {
    const wrap =
      (level: "debug" | "info" | "warn" | "error") => (message: string, fields?: Record<string, unknown>) =>
        inner[level](this.text(message), fields ? this.deep(fields) : undefined);
    return {
      debug: wrap("debug"),
      info: wrap("info"),
      warn: wrap("warn"),
      error: wrap("error"),
      child: (scope) => this.logger(inner.child(scope)),
    };
  }
}
