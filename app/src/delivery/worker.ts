import { rm } from "node:fs/promises";
import { errorMessage, type Logger } from "@stavrobot/common";
import { isDatabaseUnavailable } from "../db/database.js";
import type { Channel, Delivery, DeliveryStore } from "./store.js";

/** How a send went, as a channel reports it. */
export type SendResult =
  | { ok: true }
  /**
   * Try again later (outage, 5xx, rate limit); `retryAfterMs` when the channel said when;
   * `channelDown` when the channel itself cannot send now (its service or program is not running),
   * not just this message.
   */
  | { ok: false; retry: true; error: string; retryAfterMs?: number; channelDown?: boolean }
  /** Never going to work (chat not found, bad request): give up now. */
  | { ok: false; retry: false; error: string };

export interface ChannelSender {
  send(delivery: Delivery): Promise<SendResult>;
}

/**
 * What follows the worker's sends (`OwnerFallback`: a message the owner's channel cannot deliver is
 * kept for their consoles). Each is awaited; a failure is logged and sending goes on.
 */
export interface DeliveryFollowUp {
  /** Before each look at the due deliveries. */
  beforeRound(): Promise<void>;
  /** After an attempt that failed (to be retried, or given up). */
  afterFailure(delivery: Delivery, result: Exclude<SendResult, { ok: true }>): Promise<void>;
  /** After a delivery was sent. */
  afterSent(delivery: Delivery): Promise<void>;
}

export interface DeliveryWorkerDeps {
  store: DeliveryStore;
  channels: Partial<Record<Channel, ChannelSender>>;
  logger: Logger;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Attempts after which a delivery is given up (about a day with the default backoff). */
  maxAttempts?: number;
  /** Told when a delivery is given up (the owner hears of it on their console). */
  onGiveUp?: (delivery: Delivery, error: string) => Promise<void>;
  followUp?: DeliveryFollowUp;
}

/**
 * Sends what the deliveries table holds, oldest first, each row with its own backoff. It sleeps until
 * the next row is due and is woken when something new is queued.
 */
export class DeliveryWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** A round asked for while one runs: it follows, and these wait for it. */
  private again: { promise: Promise<void>; resolve: () => void } | undefined;
  private stopped = true;
  /** Callers waiting for the first attempt at a delivery (a send tool reporting how it went). */
  private readonly waiters = new Map<number, ((result: SendResult) => void)[]>();

  constructor(private readonly deps: DeliveryWorkerDeps) {}

  start(): void {
    this.stopped = false;
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /**
   * Sends these deliveries as soon as the worker gets to them and resolves with how each first
   * attempt went, or with `undefined` for those not attempted within `timeoutMs` (still queued).
   */
  async attemptSoon(ids: number[], timeoutMs: number): Promise<(SendResult | undefined)[]> {
    const results = ids.map(
      (id) =>
        new Promise<SendResult | undefined>((resolve) => {
          const list = this.waiters.get(id) ?? [];
          list.push(resolve);
          this.waiters.set(id, list);
          const timer = setTimeout(() => resolve(undefined), timeoutMs);
          timer.unref();
        }),
    );
    void this.kick();
    const settled = await Promise.all(results);
    for (const id of ids) this.waiters.delete(id);
    return settled;
  }

  /**
   * Something was queued (or is due): send now. Resolves when a round that began after this call
   * is done (one running already may have missed what was just queued: another follows it).
   */
  kick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      if (!this.again) {
        let resolve = (): void => {};
        const promise = new Promise<void>((done) => (resolve = done));
        this.again = { promise, resolve };
      }
      return this.again.promise;
    }
    if (this.timer) clearTimeout(this.timer);
    this.running = this.round()
      .catch((error: unknown) => {
        this.deps.logger.error("delivery round failed", { error: errorMessage(error) });
        if (isDatabaseUnavailable(error)) this.schedule(5_000);
      })
      .finally(() => {
        this.running = undefined;
        const again = this.again;
        this.again = undefined;
        if (again) void this.kick().then(again.resolve);
      });
    return this.running;
  }

  private async round(): Promise<void> {
    for (;;) {
      await this.follow("beforeRound", (followUp) => followUp.beforeRound());
      const due = await this.deps.store.due();
      if (due.length === 0) break;
      for (const delivery of due) {
        if (this.stopped) return;
        await this.attempt(delivery);
      }
    }
    const next = await this.deps.store.nextDueAt();
    if (next) this.schedule(Math.max(0, next.getTime() - Date.now()));
  }

  /** Sends one delivery, records how it went, then tells whoever waits for it. */
  async attempt(delivery: Delivery): Promise<SendResult> {
    const result = await this.sendAndRecord(delivery);
    for (const wake of this.waiters.get(delivery.id) ?? []) wake(result);
    this.waiters.delete(delivery.id);
    return result;
  }

  private async sendAndRecord(delivery: Delivery): Promise<SendResult> {
    const { store, logger } = this.deps;
    const channel = this.deps.channels[delivery.channel];
    let result: SendResult;
    if (!channel) {
      result = { ok: false, retry: false, error: `the ${delivery.channel} channel is not configured` };
    } else {
      try {
        result = await channel.send(delivery);
      } catch (error) {
        result = { ok: false, retry: true, error: errorMessage(error) };
      }
    }
    if (result.ok) {
      await store.sent(delivery.id);
      await this.release(delivery);
      await this.follow("afterSent", (followUp) => followUp.afterSent(delivery));
      return result;
    }
    const attempts = delivery.attempts + 1;
    if (!result.retry || attempts >= (this.deps.maxAttempts ?? 30)) {
      logger.error("delivery given up", { id: delivery.id, channel: delivery.channel, error: result.error });
      await store.failed(delivery.id, result.error);
      await this.release(delivery);
      await this.deps.onGiveUp?.(delivery, result.error).catch(() => undefined);
      await this.follow("afterFailure", (followUp) => followUp.afterFailure(delivery, result));
      return result;
    }
    const backoff = Math.min(
      (this.deps.baseDelayMs ?? 2_000) * 2 ** (attempts - 1),
      this.deps.maxDelayMs ?? 30 * 60_000,
    );
    const delay = Math.max(backoff, result.retryAfterMs ?? 0);
    // Said once per delivery and reason: a channel down for hours fails every retry the same way.
    const log = result.error === delivery.lastError ? logger.debug : logger.warn;
    log.call(logger, "delivery failed; will retry", {
      id: delivery.id,
      channel: delivery.channel,
      inMs: delay,
      error: result.error,
    });
    // A channel that asks to wait more than a minute (a long rate limit) cannot send for now either.
    const channelDown = (result.channelDown ?? false) || (result.retryAfterMs ?? 0) > 60_000;
    await store.retryLater(delivery.id, delay, result.error, channelDown);
    await this.follow("afterFailure", (followUp) => followUp.afterFailure(delivery, result));
    return result;
  }

  /** Runs a follow-up; its failure is logged, never stops the sending. */
  private async follow(step: string, run: (followUp: DeliveryFollowUp) => Promise<void>): Promise<void> {
    const followUp = this.deps.followUp;
    if (!followUp) return;
    try {
      await run(followUp);
    } catch (error) {
      this.deps.logger.error("a delivery follow-up failed", { step, error: errorMessage(error) });
    }
  }

  /** Deliveries' copy of an attachment is not needed once its delivery is settled. */
  private async release(delivery: Delivery): Promise<void> {
    const path = delivery.payload.attachmentPath;
    if (path) await rm(path, { force: true }).catch(() => undefined);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.kick(), Math.min(ms, 60 * 60_000));
    this.timer.unref();
  }
}
