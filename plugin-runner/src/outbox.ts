import { createHash, randomUUID } from "node:crypto";
import { mkdir, readFile, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { ServiceError, chatRequestSchema, errorMessage, formatZodError } from "@stavrobot/common";
import type { ChatRequest, Logger, ServiceClient } from "@stavrobot/common";
import { writeFileAtomic } from "./fs-safe.js";

export interface OutboxOptions {
  /** Where pending messages live, one JSON file each. */
  dir: string;
  /** Points at the app's internal server; called with no retries of its own. */
  app: ServiceClient;
  logger: Logger;
  /** First retry delay; doubles per failed attempt up to `maxDelayMs`. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** The app answers `POST /chat` only after the agent's turn, which can take minutes. */
  deliveryTimeoutMs?: number;
}

/** Answers that will never succeed however often they are retried. */
const PERMANENT = new Set([400, 413, 422]);

/** What `chatRequestSchema` accepts as an `idempotencyKey`. */
const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{8,200}$/;

/**
 * The `idempotencyKey` sent with every delivery attempt of one outbox entry: derived from its file
 * name, which never changes while the entry waits, so a retry, a retry without files and a re-send
 * after a restart all carry the same key and the app can recognise a result it already received.
 */
export function idempotencyKeyFor(name: string): string {
  const key = `plugin-runner:${name.replace(/\.json$/, "")}`;
  if (IDEMPOTENCY_KEY.test(key)) return key;
  return `plugin-runner:sha256-${createHash("sha256").update(name).digest("hex")}`;
}

/**
 * Durable delivery of async results to the app's `POST /chat`. Each message is written to disk
 * (temp file + rename) before the first attempt and deleted only after a 2xx; failures are retried
 * with exponential backoff, oldest first, and whatever is left is re-sent when the runner starts.
 * A message the app refuses outright (400/413/422) is moved to `failed/` instead of retried forever.
 * Every attempt carries the entry's `idempotencyKey` (see `idempotencyKeyFor`): the app answers only
 * after the agent's turn, so an attempt that timed out may still have been processed.
 */
export class Outbox {
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private running: Promise<void> | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  private rerun = false;

  constructor(private readonly options: OutboxOptions) {
    this.baseDelayMs = options.baseDelayMs ?? 5_000;
    this.maxDelayMs = options.maxDelayMs ?? 10 * 60_000;
  }

  /** Clears half-written files and starts re-sending whatever a previous run left behind. */
  async start(): Promise<void> {
    await mkdir(join(this.options.dir, "failed"), { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.options.dir)) {
      if (name.startsWith(".tmp-")) await rm(join(this.options.dir, name), { force: true });
    }
    this.stopped = false;
    this.kick();
  }

  /** Persists a message, then schedules its delivery. Resolves once it is safely on disk. */
  async enqueue(message: ChatRequest): Promise<string> {
    const parsed = chatRequestSchema.safeParse(message);
    if (!parsed.success)
      throw new Error(`Refusing to queue an invalid chat message: ${formatZodError(parsed.error)}`);
    const id = `${Date.now().toString().padStart(15, "0")}-${randomUUID()}.json`;
    await writeFileAtomic(join(this.options.dir, id), JSON.stringify({ message: parsed.data }));
    this.kick();
    return id;
  }

  /** File names still waiting for delivery, oldest first. */
  async pending(): Promise<string[]> {
    const names = await readdir(this.options.dir).catch(() => [] as string[]);
    return names.filter((name) => name.endsWith(".json") && !name.startsWith(".")).sort();
  }

  /** Stops delivering (pending files stay on disk for the next start). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.sleepTimer) clearTimeout(this.sleepTimer);
    this.wake?.();
    await this.running;
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.rerun = true;
      return;
    }
    this.running = this.drain()
      .catch((error) => this.options.logger.error("outbox worker failed", { error: errorMessage(error) }))
      .finally(() => {
        this.running = undefined;
        if (this.rerun && !this.stopped) {
          this.rerun = false;
          this.kick();
        }
      });
  }

  private async drain(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      this.rerun = false;
      const [next] = await this.pending();
      if (!next) return;
      const outcome = await this.deliver(next);
      if (outcome === "done") {
        failures = 0;
        continue;
      }
      failures++;
      const delay = Math.min(this.baseDelayMs * 2 ** (failures - 1), this.maxDelayMs);
      await this.sleep(delay);
    }
  }

  private async deliver(name: string): Promise<"done" | "retry"> {
    const path = join(this.options.dir, name);
    let message: unknown;
    try {
      message = (JSON.parse(await readFile(path, "utf8")) as { message: unknown }).message;
    } catch (error) {
      this.options.logger.error("unreadable outbox entry, moving it aside", {
        name,
        error: errorMessage(error),
      });
      await rename(path, join(this.options.dir, "failed", name)).catch(() => undefined);
      return "done";
    }
    try {
      await this.options.app.request("POST", "/chat", {
        body: withIdempotencyKey(message, name),
        retries: 0,
        timeoutMs: this.options.deliveryTimeoutMs ?? 10 * 60_000,
      });
      await rm(path, { force: true });
      this.options.logger.info("delivered async result to the app", { name });
      return "done";
    } catch (error) {
      if (error instanceof ServiceError && error.status === 413 && hasFiles(message)) {
        // Too big for the app: deliver the text at least.
        this.options.logger.warn("app refused an async result as too large; retrying without files", {
          name,
        });
        await writeFileAtomic(path, JSON.stringify({ message: withoutFiles(message) }));
        return "retry";
      }
      if (error instanceof ServiceError && error.status !== undefined && PERMANENT.has(error.status)) {
        this.options.logger.error("app refused an async result; moved to failed/", {
          name,
          error: error.message,
        });
        await rename(path, join(this.options.dir, "failed", name)).catch(() => undefined);
        return "done";
      }
      this.options.logger.warn("could not deliver async result yet", { name, error: errorMessage(error) });
      return "retry";
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.sleepTimer = setTimeout(resolve, ms);
    });
  }
}

/** The stored message plus the entry's key (a key the sender chose itself is kept). */
function withIdempotencyKey(message: unknown, name: string): unknown {
  if (typeof message !== "object" || message === null || Array.isArray(message)) return message;
  const own = (message as ChatRequest).idempotencyKey;
  return { ...message, idempotencyKey: own ?? idempotencyKeyFor(name) };
}

function hasFiles(message: unknown): message is ChatRequest {
  return typeof message === "object" && message !== null && ((message as ChatRequest).files?.length ?? 0) > 0;
}

function withoutFiles(message: ChatRequest): ChatRequest {
  const names = (message.files ?? []).map((file) => file.filename).join(", ");
  const rest = { ...message };
  delete rest.files;
  return {
    ...rest,
    message: `${message.message ?? ""}\n(The app refused the output files as too large: ${names}.)`,
  };
}
