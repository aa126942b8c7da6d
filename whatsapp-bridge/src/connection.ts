import type { Logger, WhatsAppLinkRequest, WhatsAppLinkStatus, WhatsAppState } from "@stavrobot/common";
import { HttpError, errorMessage } from "@stavrobot/common";
import { jidToE164 } from "./jid.js";

/** What a socket reports, already in the bridge's terms (`baileys-socket.ts` maps Baileys' events). */
export interface SocketEvents {
  connection(update: {
    connection?: "open" | "connecting" | "close";
    qr?: string;
    statusCode?: number;
    error?: string;
  }): void;
  /** New messages to this account (Baileys' `messages.upsert` of type `notify`). */
  messages(messages: readonly unknown[]): void;
  /** Anything arrived on the socket: the watchdog's sign of life. */
  activity(): void;
}

/** The few things the bridge does with a connected socket. */
export interface WaSocket {
  requestPairingCode(digits: string): Promise<string>;
  sendMessage(
    jid: string,
    content: Record<string, unknown>,
  ): Promise<{ id?: string | null | undefined } | undefined>;
  logout(): Promise<void>;
  /** Closes it without logging out; its later events are ignored. */
  end(): void;
  /** The phone-number JID behind a `@lid` identity, when WhatsApp told it. */
  pnForLid(lid: string): Promise<string | null>;
  /** A media message's bytes. */
  download(message: unknown): Promise<Buffer>;
  /** This device's own JID, once linked. */
  ownJid(): string | undefined;
}

export type SocketFactory = (events: SocketEvents) => Promise<WaSocket>;

/** Baileys' close codes (`DisconnectReason`) the bridge tells apart, and 405 ("outdated"). */
export const CLOSE = {
  loggedOut: 401,
  outdated: 405,
  connectionLost: 408,
  connectionReplaced: 440,
  restartRequired: 515,
} as const;

export interface ConnectionTuning {
  /** The first wait after a failure; doubled each time up to `backoffMaxMs`. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** An open socket with nothing received for this long is closed and opened again. */
  watchdogSilentMs?: number;
  watchdogIntervalMs?: number;
  /** A socket neither open nor offering a code this long after it was made is given up (a failure). */
  connectTimeoutMs?: number;
}

export interface ConnectionDeps {
  factory: SocketFactory;
  /** Whether a linked session is on disk. */
  hasSession(): Promise<boolean>;
  /** Forgets the session (unlink, logged out). */
  clearSession(): Promise<void>;
  onMessages(socket: WaSocket, messages: readonly unknown[]): void;
  /** Called on every change of state, with the state's status (for the event stream, the owner's notice). */
  onState?(status: WhatsAppLinkStatus): void;
  logger: Logger;
  tuning?: ConnectionTuning;
  now?: () => number;
}

const OUTDATED_PROBLEM =
  "WhatsApp refuses this client's version (405, outdated). Set [whatsapp] version in config.toml " +
  "(WHATSAPP_VERSION for the bridge) to WhatsApp Web's current version, or update the bridge; " +
  "retrying meanwhile.";

/**
 * The WhatsApp connection, which never dies quietly: a restart WhatsApp asks for is made at once;
 * a device the phone logged out is `loggedOut` (its session forgotten, link again); a session
 * another one replaced is `replaced` and stays stopped; an outdated version is `outdated` and
 * names the setting that overrides it; anything else is `failing` and retried with capped backoff,
 * forever. A watchdog reopens a socket that says it is open but has gone silent.
 */
export class WhatsAppConnection {
  private state: WhatsAppState = "unlinked";
  private problem: string | undefined;
  private lastError: string | undefined;
  private lastErrorAt: number | undefined;
  private lastInbound: number | undefined;
  private qr: string | undefined;
  private code: string | undefined;
  private account: string | undefined;
  private socket: WaSocket | undefined;
  private generation = 0;
  private failures = 0;
  private lastActivity = 0;
  private attemptStarted = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  /** The number a pairing code is asked for, while linking with one. */
  private pairingNumber: string | undefined;
  private stopped = false;
  private readonly now: () => number;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private readonly silentMs: number;
  private readonly connectTimeoutMs: number;

  constructor(private readonly deps: ConnectionDeps) {
    this.now = deps.now ?? Date.now;
    this.backoffBaseMs = deps.tuning?.backoffBaseMs ?? 2_000;
    this.backoffMaxMs = deps.tuning?.backoffMaxMs ?? 5 * 60_000;
    this.silentMs = deps.tuning?.watchdogSilentMs ?? 3 * 60_000;
    this.connectTimeoutMs = deps.tuning?.connectTimeoutMs ?? 90_000;
    const interval = deps.tuning?.watchdogIntervalMs ?? 30_000;
    this.watchdog = setInterval(() => this.checkSilence(), interval);
    this.watchdog.unref();
  }

  /** Connects when a session is on disk; otherwise waits, `unlinked`, for the owner to link. */
  async start(): Promise<void> {
    if (await this.deps.hasSession()) await this.connect("connecting");
    else this.setState("unlinked", "Not linked yet: link a number from the web page's WhatsApp page.");
  }

  /** The state as the health route shows it (no QR or pairing code). */
  health(): Omit<WhatsAppLinkStatus, "qr" | "code"> {
    const iso = (time: number | undefined) => (time === undefined ? undefined : new Date(time).toISOString());
    return {
      whatsapp: this.state,
      ...(this.problem ? { problem: this.problem } : {}),
      ...(this.account ? { account: this.account } : {}),
      ...(this.lastInbound !== undefined ? { lastInbound: iso(this.lastInbound) } : {}),
      ...(this.lastError ? { lastError: this.lastError, lastErrorAt: iso(this.lastErrorAt) } : {}),
    };
  }

  /** The state with what the owner needs to link now (behind the secret). */
  linkStatus(): WhatsAppLinkStatus {
    return {
      ...this.health(),
      ...(this.state === "qr" && this.qr ? { qr: this.qr } : {}),
      ...(this.state === "code" && this.code ? { code: this.code } : {}),
    };
  }

  get current(): WhatsAppState {
    return this.state;
  }

  /** The open socket, or a 503 saying why there is none (the app's outbox retries). */
  openSocket(): WaSocket {
    if (this.state !== "open" || !this.socket) {
      throw new HttpError(503, `WhatsApp is ${this.state}${this.problem ? `: ${this.problem}` : ""}`, {
        whatsapp: this.state,
      });
    }
    return this.socket;
  }

  /** A message arrived (the health route's "last inbound"). */
  noteInbound(): void {
    this.lastInbound = this.now();
  }

  /**
   * Starts linking: a fresh session, then a QR code (rotating) or a pairing code for `phoneNumber`.
   * Refused while a session is open (unlink first).
   */
  async link(request: WhatsAppLinkRequest): Promise<WhatsAppLinkStatus> {
    if (this.state === "open") throw new HttpError(409, "WhatsApp is linked already: unlink it first");
    this.closeSocket();
    await this.deps.clearSession();
    this.account = undefined;
    this.pairingNumber = request.method === "code" ? request.phoneNumber.slice(1) : undefined;
    this.setState("connecting", "Linking: waiting for WhatsApp to offer a code.");
    await this.connect("connecting");
    return this.linkStatus();
  }

  /** Logs this device out (best effort) and forgets the session. */
  async unlink(): Promise<void> {
    const socket = this.socket;
    this.closeSocket();
    if (socket) {
      await socket.logout().catch((error: unknown) => {
        this.deps.logger.warn("WhatsApp did not take the logout; forgetting the session anyway", {
          error: errorMessage(error),
        });
      });
      socket.end();
    }
    await this.deps.clearSession();
    this.account = undefined;
    this.pairingNumber = undefined;
    this.setState("unlinked", "Unlinked: link a number from the web page's WhatsApp page.");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.watchdog) clearInterval(this.watchdog);
    this.closeSocket();
  }

  /** Ends the current socket, ignoring whatever it still reports, and cancels a pending retry. */
  private closeSocket(): void {
    this.generation += 1;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const socket = this.socket;
    this.socket = undefined;
    socket?.end();
  }

  private async connect(state: WhatsAppState): Promise<void> {
    if (this.stopped) return;
    this.closeSocket();
    const generation = this.generation;
    this.attemptStarted = this.now();
    if (state !== this.state) this.setState(state, this.problem);
    const live = () => generation === this.generation && !this.stopped;
    try {
      const socket = await this.deps.factory({
        connection: (update) => {
          if (live()) void this.onUpdate(update);
        },
        messages: (messages) => {
          if (!live() || !this.socket) return;
          this.lastActivity = this.now();
          this.deps.onMessages(this.socket, messages);
        },
        activity: () => {
          if (live()) this.lastActivity = this.now();
        },
      });
      if (!live()) {
        socket.end();
        return;
      }
      this.socket = socket;
      this.lastActivity = this.now();
    } catch (error) {
      if (live()) this.onClose(undefined, `could not open the socket: ${errorMessage(error)}`);
    }
  }

  private async onUpdate(update: Parameters<SocketEvents["connection"]>[0]): Promise<void> {
    this.lastActivity = this.now();
    if (update.qr) await this.onQr(update.qr);
    if (update.connection === "open") {
      this.failures = 0;
      this.qr = undefined;
      this.code = undefined;
      this.pairingNumber = undefined;
      const own = this.socket?.ownJid();
      const number = own ? jidToE164(own) : undefined;
      if (number) this.account = number;
      this.setState("open", undefined);
      this.deps.logger.info("WhatsApp is open", { account: this.account });
    } else if (update.connection === "close") {
      this.onClose(update.statusCode, update.error ?? "connection closed");
    }
  }

  private async onQr(qr: string): Promise<void> {
    if (this.pairingNumber === undefined) {
      this.qr = qr;
      this.setState("qr", "Scan the QR code on the web page's WhatsApp page (WhatsApp → Linked devices).");
      return;
    }
    // A pairing code is asked once per socket, when it is ready for one (its first QR).
    if (this.state === "code") return;
    const socket = this.socket;
    if (!socket) return;
    try {
      this.code = await socket.requestPairingCode(this.pairingNumber);
      this.setState(
        "code",
        "Type the pairing code on the phone (WhatsApp → Linked devices → Link with phone number).",
      );
    } catch (error) {
      this.recordError(undefined, `could not get a pairing code: ${errorMessage(error)}`);
      this.closeSocket();
      this.pairingNumber = undefined;
      this.setState(
        "unlinked",
        `WhatsApp gave no pairing code (${errorMessage(error)}): try again or use the QR code.`,
      );
    }
  }

  private onClose(statusCode: number | undefined, message: string): void {
    this.socket = undefined;
    this.generation += 1;
    this.recordError(statusCode, message);
    const linking = this.state === "qr" || this.state === "code";
    if (statusCode === CLOSE.restartRequired) {
      // Asked after linking, and now and then by WhatsApp: not a failure.
      this.deps.logger.info("WhatsApp asked for a restart; reconnecting");
      void this.connect("connecting");
      return;
    }
    if (statusCode === CLOSE.loggedOut) {
      this.deps.logger.warn("WhatsApp logged this device out; the session is forgotten");
      void this.deps.clearSession();
      this.account = undefined;
      this.setState(
        "loggedOut",
        "The phone logged this device out: link it again from the web page's WhatsApp page.",
      );
      return;
    }
    if (statusCode === CLOSE.connectionReplaced) {
      this.deps.logger.warn("another WhatsApp Web session replaced this one; stopped");
      this.setState(
        "replaced",
        "Another session with the same keys replaced this one (a second bridge, or a copied data directory); stopped. Stop the other one, then restart the bridge or link again.",
      );
      return;
    }
    if (statusCode === CLOSE.outdated) {
      // Before a code is offered as well as after a link: no version WhatsApp refuses can link.
      this.qr = undefined;
      this.code = undefined;
      this.retryLater(statusCode, message, "outdated");
      return;
    }
    if (linking) {
      // The QR codes ran out, or the pairing code was not typed in time.
      this.qr = undefined;
      this.code = undefined;
      this.pairingNumber = undefined;
      this.setState(
        "unlinked",
        "Linking timed out before the phone confirmed it: start again from the web page.",
      );
      return;
    }
    this.retryLater(statusCode, message, "failing");
  }

  /** `outdated` or `failing` until a later attempt, after a wait doubling up to its cap. */
  private retryLater(statusCode: number | undefined, message: string, state: "outdated" | "failing"): void {
    const delay = Math.min(this.backoffBaseMs * 2 ** this.failures, this.backoffMaxMs);
    this.failures += 1;
    if (state === "outdated") this.setState("outdated", OUTDATED_PROBLEM);
    else
      this.setState(
        "failing",
        `The connection keeps closing (${this.lastError}); retrying in ${Math.round(delay / 1000)} s, forever.`,
      );
    this.deps.logger.warn("WhatsApp closed; reconnecting later", {
      statusCode,
      error: message,
      delayMs: delay,
    });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.connect(this.state);
    }, delay);
  }

  /**
   * Reopens a socket that says it is open but has received nothing for too long, and gives up on
   * one that never opened (a server that took the connection and then said nothing: Baileys
   * itself would wait forever).
   */
  private checkSilence(): void {
    const waiting =
      this.socket !== undefined &&
      (this.state === "connecting" || this.state === "failing" || this.state === "outdated");
    if (waiting && this.now() - this.attemptStarted > this.connectTimeoutMs) {
      const seconds = Math.round((this.now() - this.attemptStarted) / 1000);
      this.closeSocket();
      this.onClose(undefined, `WhatsApp did not answer within ${seconds} s`);
      return;
    }
    if (this.state !== "open" || this.now() - this.lastActivity <= this.silentMs) return;
    const seconds = Math.round((this.now() - this.lastActivity) / 1000);
    this.recordError(undefined, `the open socket was silent for ${seconds} s; reopened it`);
    this.deps.logger.warn("WhatsApp went silent; reconnecting", { silentSeconds: seconds });
    void this.connect("connecting");
  }

  private recordError(statusCode: number | undefined, message: string): void {
    this.lastError = statusCode === undefined ? message : `${statusCode}: ${message}`;
    this.lastErrorAt = this.now();
  }

  private setState(state: WhatsAppState, problem: string | undefined): void {
    const changed = state !== this.state || problem !== this.problem;
    this.state = state;
    this.problem = problem;
    if (changed) this.deps.onState?.(this.linkStatus());
  }
}
