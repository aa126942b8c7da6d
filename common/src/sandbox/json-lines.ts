import type { LongLivedProcess } from "./long-lived.js";

/**
 * Requests and answers as JSON, one object per line, over a long-lived process's stdio: each
 * request carries an `id` the answer repeats. Lines that are not JSON objects, or answer no
 * request, go to `onMessage` (a host's own events) or are ignored. When the process exits, every
 * request still waiting fails, naming how it ended and the end of its stderr.
 */
export class JsonLines {
  private nextId = 1;
  private readonly waiting = new Map<
    number,
    { resolve: (value: Record<string, unknown>) => void; reject: (error: Error) => void }
  >();
  private readonly listeners: ((message: Record<string, unknown>) => void)[] = [];

  constructor(readonly process: LongLivedProcess) {
    process.onLine((line) => this.hear(line));
    void process.exited.then((exit) => {
      const how = exit.spawnError
        ? `could not be started: ${exit.spawnError}`
        : exit.signal
          ? `was killed by ${exit.signal}`
          : `exited with code ${exit.code}`;
      const stderr = process.stderrTail().trim();
      const error = new ProcessGoneError(`The process ${how}${stderr ? `: ${stderr.slice(0, 2_000)}` : ""}`);
      for (const entry of this.waiting.values()) entry.reject(error);
      this.waiting.clear();
    });
  }

  /** Messages that answer no request. */
  onMessage(listener: (message: Record<string, unknown>) => void): void {
    this.listeners.push(listener);
  }

  /** Sends `message` with a fresh `id` and resolves with the answer carrying it. */
  request(message: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (!this.process.write(JSON.stringify({ ...message, id }) + "\n")) {
        reject(new ProcessGoneError("The process is not running"));
        return;
      }
      this.waiting.set(id, { resolve, reject });
    });
  }

  private hear(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (!message || typeof message !== "object" || Array.isArray(message)) return;
    const record = message as Record<string, unknown>;
    const waiter = typeof record.id === "number" ? this.waiting.get(record.id) : undefined;
    if (waiter) {
      this.waiting.delete(record.id as number);
      waiter.resolve(record);
      return;
    }
    for (const listener of this.listeners) listener(record);
  }
}

/** The process a request went to ended before answering it. */
export class ProcessGoneError extends Error {
  override name = "ProcessGoneError";
}
