import { rm } from "node:fs/promises";
import { errorMessage, type Logger } from "@stavrobot/common";
import { isDatabaseUnavailable } from "../db/database.js";
import type { Channel, Delivery, DeliveryStore } from "./store.js";

/** How a send went, as a channel reports it. */
export type SendResult =
  | { ok: true }
  /** Try again later (outage, 5xx, rate limit); `retryAfterMs` when the channel said when. */
  | { ok: false; retry: true; error: string; retryAfterMs?: number }
  /** Never going to work (chat not found, bad request): give up now. */
  | { ok: false; retry: false; error: string };

export interface ChannelSender {
  send(delivery: Delivery): Promise<SendResult>;
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
}

/**
 * Sends what the deliveries table holds, oldest first, each row with its own backoff. It sleeps until
 * the next row is due and is woken when something new is queued.
 */
export class DeliveryWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
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

  /** Something was queued (or is due): send now. Resolves when this round is done. */
  kick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    if (this.timer) clearTimeout(this.timer);
    this.running = this.round()
      .catch((error: unknown) => {
        this.deps.logger.error("delivery round failed", { error: errorMessage(error) });
        if (isDatabaseUnavailable(error)) this.schedule(5_000);
      })
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          void this.kick();
        }
      });
    return this.running;
  }

  private async round(): Promise<void> {
    for (;;) {
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
      return result;
    }
    const attempts = delivery.attempts + 1;
    if (!result.retry || attempts >= (this.deps.maxAttempts ?? 30)) {
      logger.error("delivery given up", { id: delivery.id, channel: delivery.channel, error: result.error });
      await store.failed(delivery.id, result.error);
      await this.release(delivery);
      await this.deps.onGiveUp?.(delivery, result.error).catch(() => undefined);
      return result;
    }
    const backoff = Math.min(
      (this.deps.baseDelayMs ?? 2_000) * 2 ** (attempts - 1),
      this.deps.maxDelayMs ?? 30 * 60_000,
    );
    const delay = Math.max(backoff, result.retryAfterMs ?? 0);
    logger.warn("delivery failed; will retry", {
      id: delivery.id,
      channel: delivery.channel,
      inMs: delay,
      error: result.error,
    });
    await store.retryLater(delivery.id, delay, result.error);
    return result;
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
