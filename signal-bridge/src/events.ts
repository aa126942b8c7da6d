import type { Logger } from "@stavrobot/common";
import { errorMessage } from "@stavrobot/common";
import type { SignalCliDaemon } from "./daemon.js";
import { SseParser, type SseEvent } from "./sse.js";

export interface EventStreamDeps {
  /** The daemon's `http://127.0.0.1:<port>`. */
  baseUrl: string;
  daemon: Pick<SignalCliDaemon, "whenRunning">;
  logger: Logger;
  /** Called for each `receive` event, one at a time, in order. Errors are logged, not retried. */
  onReceive(data: string): Promise<void>;
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  /** signal-cli sends a keep-alive every 15 s: this long without a byte means the stream is dead. */
  idleTimeoutMs?: number;
}

/**
 * Never a real id (signal-cli's are `<start millis>-<n>`), so on a first connection signal-cli
 * sends every event it kept since it started: messages it received before the stream was open
 * (with `--receive-mode on-start` it starts receiving at once) are not lost.
 */
const UNKNOWN_EVENT_ID = "0-0";

/**
 * Reads signal-cli's Server-Sent Events stream (`GET /api/v1/events`) whenever the daemon runs,
 * and reconnects when the stream drops (with growing pauses, reset by a successful connection).
 * Each reconnection sends the id of the last event handled as `Last-Event-ID`, so signal-cli
 * replays what arrived meanwhile; after a restart of signal-cli that id is unknown to it and it
 * replays everything the new daemon received so far.
 */
export class EventStream {
  private readonly controller = new AbortController();
  private loop: Promise<void> | undefined;
  private lastEventId: string | undefined;

  constructor(private readonly deps: EventStreamDeps) {}

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const signal = this.controller.signal;
    const base = this.deps.reconnectBaseMs ?? 500;
    let delay = base;
    while (!signal.aborted) {
      await this.deps.daemon.whenRunning(signal);
      if (signal.aborted) break;
      const outcome = await this.readOnce();
      if (signal.aborted) break;
      if (outcome.connected) delay = base;
      this.deps.logger.warn("Signal event stream closed; reconnecting", {
        reason: outcome.reason,
        inMs: delay,
      });
      await sleep(delay, signal);
      delay = Math.min(delay * 2, this.deps.reconnectMaxMs ?? 30_000);
    }
  }

  /** One connection, read until it ends. */
  private async readOnce(): Promise<{ connected: boolean; reason: string }> {
    const attempt = new AbortController();
    const signal = AbortSignal.any([this.controller.signal, attempt.signal]);
    const idleMs = this.deps.idleTimeoutMs ?? 90_000;
    let idleTimer: NodeJS.Timeout | undefined;
    const arm = (): void => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => attempt.abort(new Error(`no data for ${idleMs / 1000} s`)), idleMs);
    };
    let connected = false;
    try {
      arm();
      const response = await fetch(`${this.deps.baseUrl}/api/v1/events`, {
        headers: { Accept: "text/event-stream", "Last-Event-ID": this.lastEventId ?? UNKNOWN_EVENT_ID },
        signal,
      });
      if (response.status !== 200 || !response.body) {
        await response.body?.cancel();
        return { connected, reason: `HTTP ${response.status}` };
      }
      connected = true;
      this.deps.logger.info("listening for Signal messages");
      const parser = new SseParser();
      const decoder = new TextDecoder();
      for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
        clearTimeout(idleTimer);
        for (const event of parser.push(decoder.decode(chunk, { stream: true }))) await this.handle(event);
        arm();
      }
      return { connected, reason: "the stream ended" };
    } catch (error) {
      const reason = attempt.signal.aborted ? errorMessage(attempt.signal.reason) : errorMessage(error);
      return { connected, reason };
    } finally {
      clearTimeout(idleTimer);
    }
  }

  private async handle(event: SseEvent): Promise<void> {
    try {
      if (event.event === "receive") await this.deps.onReceive(event.data);
    } catch (error) {
      this.deps.logger.error("could not handle a Signal event", {
        id: event.id,
        error: errorMessage(error),
      });
    }
    if (event.id !== undefined) this.lastEventId = event.id;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
