import type { SocketEvents, SocketFactory, WaSocket } from "../src/connection.js";

/** One socket the fake handed out: what was sent on it, and controls to make it report things. */
export interface FakeSocketHandle {
  events: SocketEvents;
  sent: { jid: string; content: Record<string, unknown> }[];
  ended: boolean;
  loggedOut: boolean;
  pairingRequests: string[];
  open(): void;
  close(statusCode: number | undefined, error?: string): void;
  qr(text: string): void;
  /** Delivers messages as Baileys' `messages.upsert` of type notify. */
  receive(...messages: unknown[]): void;
  activity(): void;
}

/**
 * Stands in for Baileys: each factory call is a new socket the test drives (open, close with a
 * code, a QR code, messages); `lids` maps `@lid` identities to phone-number JIDs and `media` gives
 * a message's bytes by its id.
 */
export class FakeSockets {
  readonly sockets: FakeSocketHandle[] = [];
  session = false;
  lids = new Map<string, string>();
  media = new Map<string, Buffer>();
  own = "15550009999:3@s.whatsapp.net";
  /** Make the next sends fail with this error. */
  sendError: string | undefined;
  /** Make opening sockets fail with this error. */
  openError: string | undefined;

  get last(): FakeSocketHandle {
    const socket = this.sockets.at(-1);
    if (!socket) throw new Error("no socket was opened");
    return socket;
  }

  readonly factory: SocketFactory = async (events) => {
    if (this.openError) throw new Error(this.openError);
    const handle: FakeSocketHandle = {
      events,
      sent: [],
      ended: false,
      loggedOut: false,
      pairingRequests: [],
      open: () => events.connection({ connection: "open" }),
      close: (statusCode, error = "closed") => events.connection({ connection: "close", statusCode, error }),
      qr: (text) => events.connection({ qr: text }),
      receive: (...messages) => events.messages(messages),
      activity: () => events.activity(),
    };
    this.sockets.push(handle);
    const socket: WaSocket = {
      requestPairingCode: async (digits) => {
        handle.pairingRequests.push(digits);
        return "ABCD-EFGH";
      },
      sendMessage: async (jid, content) => {
        if (this.sendError) throw new Error(this.sendError);
        handle.sent.push({ jid, content });
        return { id: `id-${handle.sent.length}` };
      },
      logout: async () => {
        handle.loggedOut = true;
      },
      end: () => {
        handle.ended = true;
      },
      pnForLid: async (lid) => this.lids.get(lid) ?? null,
      download: async (message) => {
        const id = (message as { key?: { id?: string } }).key?.id ?? "";
        const data = this.media.get(id);
        if (!data) throw new Error("media expired");
        return data;
      },
      ownJid: () => this.own,
    };
    return socket;
  };

  /** The factory with the session kept in `session`, as the bridge takes it. */
  parts(): { factory: SocketFactory; hasSession(): Promise<boolean>; clearSession(): Promise<void> } {
    return {
      factory: this.factory,
      hasSession: async () => this.session,
      clearSession: async () => {
        this.session = false;
      },
    };
  }
}
