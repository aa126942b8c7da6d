import { ImapFlow, type ImapFlowOptions } from "imapflow";
import { errorMessage, type Logger } from "@stavrobot/common";
import { isDatabaseUnavailable } from "../../db/database.js";
import { NotReadyError } from "../../queue/intake.js";
import { MAIL_LIMIT_BYTES } from "./inbound.js";
import type { EmailConfig } from "./config.js";
import type { EmailStore } from "./store.js";

export interface ImapSettings {
  host: string;
  port: number;
  tls: boolean;
  user: string;
  password: string;
  mailbox: string;
  /** Where a handled mail is moved, if anywhere. */
  moveTo: string | undefined;
}

/**
 * An IMAP client for `settings`, as the reader and the Email page's check both connect: TLS as
 * configured; plain IMAP (allowed only on loopback, the configuration says so) without STARTTLS.
 */
export function imapClient(settings: ImapSettings, options: Partial<ImapFlowOptions> = {}): ImapFlow {
  return new ImapFlow({
    host: settings.host,
    port: settings.port,
    secure: settings.tls,
    ...(settings.tls ? {} : { doSTARTTLS: false }),
    auth: { user: settings.user, pass: settings.password },
    logger: false,
    ...options,
  });
}

/** What the home page and the doctor say of the mailbox. */
export interface ImapState {
  connected: boolean;
  /** Since when it has been trying to connect and failing, if it is. */
  failingSince: Date | undefined;
  lastError: string | undefined;
  lastMailAt: Date | undefined;
}

/** The longest wait between tries while the server is away. */
const MAX_BACKOFF_MS = 60_000;
/** How often the mailbox is looked at besides IDLE's news (a server may drop IDLE quietly). */
const CATCH_UP_MS = 5 * 60_000;

/**
 * Reads a mailbox over IMAP: every mail after the last UID handled, then waits in IDLE for the
 * next. Where it got to (UIDVALIDITY and last UID) is kept in the database after each mail, so a
 * restart of the app or the server neither loses a mail nor handles one twice, and mail already
 * read on a phone is still handled (UIDs, not the \Seen flag). A new UIDVALIDITY (the server
 * renumbered the mailbox) reads again what arrived since the cursor last moved; Message-IDs keep
 * those mails from being handled twice. A lost connection is tried again with a growing wait,
 * forever. On its very first connection it starts at the mailbox's end: older mail is not read.
 */
export class ImapReader {
  private stopped = false;
  private client: ImapFlow | undefined;
  private wake: (() => void) | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  readonly state: ImapState = {
    connected: false,
    failingSince: undefined,
    lastError: undefined,
    lastMailAt: undefined,
  };

  constructor(
    private readonly settings: ImapSettings,
    private readonly store: EmailStore,
    /** Handles one raw mail; throws only when it should be tried again later. */
    private readonly handle: (raw: Buffer) => Promise<unknown>,
    private readonly logger: Logger,
  ) {}

  /** Whether its connection waits in IDLE now (the server tells it of new mail at once). */
  get idling(): boolean {
    return this.client?.idling ?? false;
  }

  start(): () => void {
    void this.run();
    return () => this.stop();
  }

  stop(): void {
    this.stopped = true;
    this.wake?.();
    clearTimeout(this.sleepTimer);
    this.client?.close();
  }

  private async run(): Promise<void> {
    let delay = 1000;
    while (!this.stopped) {
      try {
        await this.session();
        delay = 1000;
      } catch (error) {
        if (this.stopped) break;
        this.state.connected = false;
        this.state.failingSince ??= new Date();
        this.state.lastError = errorMessage(error);
        this.logger.warn("the mailbox could not be read; trying again", {
          error: this.state.lastError,
          inSeconds: Math.round(delay / 1000),
        });
      }
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        this.sleepTimer = setTimeout(resolve, delay * (0.8 + Math.random() * 0.4));
        this.wake = resolve;
      });
      delay = Math.min(delay * 2, MAX_BACKOFF_MS);
    }
    this.state.connected = false;
  }

  /** One connection: catch up, then wait for news until the connection ends. */
  private async session(): Promise<void> {
    const { settings } = this;
    const client = imapClient(settings, { autoIdleDelay: 1000, maxIdleTime: CATCH_UP_MS });
    this.client = client;
    let closed = false;
    let news = true;
    const closedNow = new Promise<void>((resolve) => {
      client.once("close", () => {
        closed = true;
        this.wake?.();
        resolve();
      });
    });
    client.on("error", (error: unknown) => {
      this.state.lastError = errorMessage(error);
    });
    client.on("exists", () => {
      news = true;
      this.wake?.();
    });
    await client.connect();
    // Selected, not locked: the client goes into IDLE only while no lock is held.
    await client.mailboxOpen(settings.mailbox);
    this.state.connected = true;
    this.state.failingSince = undefined;
    this.state.lastError = undefined;
    this.logger.info("reading the mailbox", { mailbox: settings.mailbox });
    const catchUp = setInterval(() => {
      news = true;
      this.wake?.();
    }, CATCH_UP_MS);
    try {
      while (!this.stopped && !closed) {
        if (news) {
          news = false;
          const lock = await client.getMailboxLock(settings.mailbox);
          try {
            await this.catchUp(client);
          } finally {
            lock.release();
          }
        }
        if (news || this.stopped || closed) continue;
        await Promise.race([closedNow, new Promise<void>((resolve) => (this.wake = resolve))]);
      }
    } finally {
      clearInterval(catchUp);
    }
    if (!this.stopped) throw new Error("the server closed the connection");
    await client.logout().catch(() => undefined);
  }

  /** Handles every mail after the cursor, in UID order, moving the cursor after each. */
  private async catchUp(client: ImapFlow): Promise<void> {
    const mailbox = client.mailbox;
    if (!mailbox) throw new Error(`the mailbox ${this.settings.mailbox} is not open`);
    const cursor = await this.store.cursor(this.settings.mailbox);
    let uids: number[];
    if (!cursor) {
      await this.store.saveCursor(this.settings.mailbox, mailbox.uidValidity, mailbox.uidNext - 1);
      return;
    } else if (cursor.uidValidity !== mailbox.uidValidity) {
      // Renumbered: read again what came since the cursor last moved (a day's margin for clocks).
      const since = new Date(cursor.updatedAt.getTime() - 24 * 3600_000);
      this.logger.warn("the mailbox's UIDVALIDITY changed; reading again what arrived since", {
        since: since.toISOString(),
      });
      uids = ((await client.search({ since }, { uid: true })) || []).sort((a, b) => a - b);
      const before = uids.length > 0 ? uids[0]! - 1 : mailbox.uidNext - 1;
      await this.store.saveCursor(this.settings.mailbox, mailbox.uidValidity, before);
    } else {
      const found = (await client.search({ uid: `${cursor.lastUid + 1}:*` }, { uid: true })) || [];
      // "n:*" always names the last mail, even when it is older than n.
      uids = found.filter((uid) => uid > cursor.lastUid).sort((a, b) => a - b);
    }
    for (const uid of uids) {
      if (this.stopped) return;
      await this.handleOne(client, uid);
      await this.store.saveCursor(this.settings.mailbox, mailbox.uidValidity, uid);
    }
  }

  private async handleOne(client: ImapFlow, uid: number): Promise<void> {
    const head = await client.fetchOne(String(uid), { size: true }, { uid: true });
    if (!head) return;
    if ((head.size ?? 0) > MAIL_LIMIT_BYTES) {
      this.logger.warn("left a mail larger than 10 MB unread", { uid, bytes: head.size });
      return;
    }
    const message = await client.fetchOne(String(uid), { source: true }, { uid: true });
    if (!message || !message.source) return;
    try {
      await this.handle(message.source);
      this.state.lastMailAt = new Date();
    } catch (error) {
      // Tried again later (the database or the provider is not there yet): the cursor stays.
      if (isDatabaseUnavailable(error) || error instanceof NotReadyError) throw error;
      this.logger.error("a mail could not be handled and is skipped", { uid, error: errorMessage(error) });
      return;
    }
    if (this.settings.moveTo) {
      await client.messageMove(String(uid), this.settings.moveTo, { uid: true }).catch((error: unknown) => {
        this.logger.warn("a handled mail could not be moved", {
          uid,
          to: this.settings.moveTo,
          error: errorMessage(error),
        });
      });
    }
  }
}

/** What the IMAP reader connects with, from `[email]` (993 with TLS, 143 without, by default). */
export function imapSettings(email: EmailConfig): ImapSettings | undefined {
  if (!email.imapHost) return undefined;
  return {
    host: email.imapHost,
    port: email.imapPort ?? (email.imapTls ? 993 : 143),
    tls: email.imapTls,
    user: email.imapUser ?? "",
    password: email.imapPassword ?? "",
    mailbox: email.mailbox,
    moveTo: email.moveTo,
  };
}
