import { createHash, randomUUID } from "node:crypto";
import { mkdir, readFile, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { IDEMPOTENCY_KEY_PATTERN } from "../contracts/wire.js";
import { chatRequestSchema, type ChatRequest } from "../contracts/chat.js";
import { ServiceError, errorMessage } from "../errors.js";
import { writeFileAtomic } from "../fs/atomic.js";
import type { Logger } from "../logger.js";
import type { ServiceClient } from "../service-client.js";
import { sanitizeDeep } from "../text.js";
import { formatZodError } from "../zod-format.js";

export interface OutboxDeps {
  /** Where pending messages live, one JSON file each. */
  dir: string;
  /** Starts every idempotency key, naming the sending service (e.g. "plugin-runner"). */
  keyPrefix: string;
  /** Who the notice about a set-aside message comes from, when the message names no source. */
  name?: string;
  /** Points at the app's internal server; called with no retries of its own. */
  app: ServiceClient;
  logger: Logger;
  /** First retry delay of an entry; doubles per failed attempt up to `maxDelayMs`. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Error answers from the app after which an entry is set aside (with a notice to the owner). */
  maxRefusals?: number;
  deliveryTimeoutMs?: number;
  now?: () => number;
}

/** Answers that will never succeed however often they are retried. */
const PERMANENT = new Set([400, 422]);

interface StoredEntry {
  message: ChatRequest;
  /** Failed attempts so far (any reason): sets the entry's own backoff. */
  attempts?: number;
  /** Error answers from the app so far: bounded, then the entry is set aside. */
  refusals?: number;
  /** A notice about another entry: never itself the subject of a notice. */
  notice?: boolean;
}

/**
 * The `idempotencyKey` sent with every delivery attempt of one outbox entry: derived from its file
 * name, which never changes while the entry waits, so a retry, a retry without files and a re-send
 * after a restart all carry the same key and the app can recognise a message it already received.
 */
export function idempotencyKeyFor(name: string, prefix: string): string {
  const key = `${prefix}:${name.replace(/\.json$/, "")}`;
  if (IDEMPOTENCY_KEY_PATTERN.test(key)) return key;
  return `${prefix}:sha256-${createHash("sha256").update(name).digest("hex")}`;
}

/**
 * Durable delivery of messages to the app's internal `POST /chat` (a plugin's async result, the
 * coder's report, an incoming Signal message). Each message is written to
 * disk (temp file + rename) before the first attempt and deleted only after a 2xx. Every entry has
 * its own backoff, so one the app keeps refusing never holds up the others; after `maxRefusals`
 * error answers (at once for 400/422) it is moved to `failed/` and the owner is told. While the app
 * is unreachable, entries simply wait. Deliveries ask the app to answer once the message is safely
 * accepted (`Prefer: respond-async`), not after the turn it starts.
 */
export class Outbox {
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly maxRefusals: number;
  private readonly now: () => number;
  /** When each pending entry is next due. */
  private readonly due = new Map<string, number>();
  private running: Promise<void> | undefined;
  private stopped = true;
  private wake: (() => void) | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: OutboxDeps) {
    this.baseDelayMs = deps.baseDelayMs ?? 5_000;
    this.maxDelayMs = deps.maxDelayMs ?? 10 * 60_000;
    this.maxRefusals = deps.maxRefusals ?? 8;
    this.now = deps.now ?? Date.now;
  }

  private get failedDir(): string {
    return join(this.deps.dir, "failed");
  }

  /** Clears half-written files and starts re-sending whatever a previous run left behind. */
  async start(): Promise<void> {
    await mkdir(this.failedDir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.deps.dir)) {
      if (name.startsWith(".tmp-")) await rm(join(this.deps.dir, name), { force: true });
    }
    for (const name of await this.pending()) if (!this.due.has(name)) this.due.set(name, this.now());
    this.stopped = false;
    this.kick();
  }

  /**
   * Persists a message, then schedules its delivery. Resolves once it is safely on disk. `id`
   * names the entry (so a caller can recognise it later); text the app could not store is made
   * storable first.
   */
  async enqueue(message: ChatRequest, options: { id?: string; notice?: boolean } = {}): Promise<string> {
    const parsed = chatRequestSchema.safeParse(sanitizeDeep(message));
    if (!parsed.success)
      throw new Error(`Refusing to queue an invalid chat message: ${formatZodError(parsed.error)}`);
    const name = options.id
      ? `${options.id}.json`
      : `${Date.now().toString().padStart(15, "0")}-${randomUUID()}.json`;
    const entry: StoredEntry = { message: parsed.data, ...(options.notice ? { notice: true } : {}) };
    await writeFileAtomic(join(this.deps.dir, name), JSON.stringify(entry));
    this.due.set(name, this.now());
    this.kick();
    return name;
  }

  /** File names still waiting for delivery, oldest first. */
  async pending(): Promise<string[]> {
    const names = await readdir(this.deps.dir).catch(() => [] as string[]);
    return names.filter((name) => name.endsWith(".json") && !name.startsWith(".")).sort();
  }

  /** Whether an entry of this name is waiting or was set aside. */
  async holds(name: string): Promise<boolean> {
    const [pending, failed] = await Promise.all([
      this.pending(),
      readdir(this.failedDir).catch(() => [] as string[]),
    ]);
    return pending.includes(name) || failed.includes(name);
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
      this.wake?.();
      return;
    }
    this.running = this.drain()
      .catch((error) => this.deps.logger.error("outbox worker failed", { error: errorMessage(error) }))
      .finally(() => {
        this.running = undefined;
        if (!this.stopped && this.due.size > 0) this.kick();
      });
  }

  private async drain(): Promise<void> {
    while (!this.stopped && this.due.size > 0) {
      const [name, at] = [...this.due.entries()].sort(
        (a, b) => a[1] - b[1] || a[0].localeCompare(b[0]),
      )[0] as [string, number];
      const wait = at - this.now();
      if (wait > 0) {
        await this.sleep(wait);
        continue;
      }
      await this.deliver(name);
    }
  }

  private async deliver(name: string): Promise<void> {
    const path = join(this.deps.dir, name);
    let entry: StoredEntry;
    try {
      entry = JSON.parse(await readFile(path, "utf8")) as StoredEntry;
      if (!entry || typeof entry !== "object" || !entry.message) throw new Error("no message");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") {
        this.due.delete(name);
        return;
      }
      this.deps.logger.error("unreadable outbox entry, moving it aside", {
        name,
        error: errorMessage(error),
      });
      await this.setAside(name, undefined, "the entry could not be read");
      return;
    }
    try {
      await this.deps.app.request("POST", "/chat", {
        body: {
          ...entry.message,
          idempotencyKey: entry.message.idempotencyKey ?? idempotencyKeyFor(name, this.deps.keyPrefix),
        },
        headers: { Prefer: "respond-async" },
        retries: 0,
        timeoutMs: this.deps.deliveryTimeoutMs ?? 60_000,
      });
      await rm(path, { force: true });
      this.due.delete(name);
      this.deps.logger.info("delivered a message to the app", { name });
    } catch (error) {
      await this.failed(name, path, entry, error);
    }
  }

  private async failed(name: string, path: string, entry: StoredEntry, error: unknown): Promise<void> {
    const status = error instanceof ServiceError ? error.status : undefined;
    const attempts = (entry.attempts ?? 0) + 1;
    if (status === 413 && (entry.message.files?.length ?? 0) > 0) {
      // Too big for the app: deliver the text at least.
      this.deps.logger.warn("the app refused a message as too large; retrying without files", { name });
      await this.save(path, { ...entry, message: withoutFiles(entry.message), attempts });
      this.due.set(name, this.now());
      return;
    }
    // An answer from the app counts towards setting the entry aside; silence (it is down) does not.
    const refusals =
      (entry.refusals ?? 0) + (status === undefined ? 0 : PERMANENT.has(status) ? this.maxRefusals : 1);
    if (refusals >= this.maxRefusals) {
      this.deps.logger.error("the app keeps refusing a message; moved to failed/", {
        name,
        error: errorMessage(error),
      });
      await this.setAside(name, entry, errorMessage(error));
      return;
    }
    const delay = Math.min(this.baseDelayMs * 2 ** (attempts - 1), this.maxDelayMs);
    this.deps.logger.warn("could not deliver a message yet", {
      name,
      inMs: delay,
      error: errorMessage(error),
    });
    await this.save(path, { ...entry, attempts, refusals });
    this.due.set(name, this.now() + delay);
  }

  private async setAside(name: string, entry: StoredEntry | undefined, reason: string): Promise<void> {
    this.due.delete(name);
    await rename(join(this.deps.dir, name), join(this.failedDir, name)).catch(() => undefined);
    if (entry?.notice) return;
    const source = entry?.message.source ?? this.deps.name ?? this.deps.keyPrefix;
    await this.enqueue(
      {
        source,
        message:
          `A message from ${source} could not be delivered to the assistant and was set aside ` +
          `(${this.deps.name ?? this.deps.keyPrefix} outbox, failed/${name}). The last error was: ${reason.slice(0, 500)}`,
      },
      { notice: true },
    ).catch((error: unknown) =>
      this.deps.logger.error("could not queue a notice about a failed delivery", {
        name,
        error: errorMessage(error),
      }),
    );
  }

  private async save(path: string, entry: StoredEntry): Promise<void> {
    await writeFileAtomic(path, JSON.stringify(entry)).catch((error: unknown) =>
      this.deps.logger.warn("could not record an outbox attempt", { error: errorMessage(error) }),
    );
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = () => {
        if (this.sleepTimer) clearTimeout(this.sleepTimer);
        this.wake = undefined;
        resolve();
      };
      this.sleepTimer = setTimeout(() => this.wake?.(), ms);
    });
  }
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
