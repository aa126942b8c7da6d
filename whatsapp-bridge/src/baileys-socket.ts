import {
  BufferJSON,
  downloadMediaMessage,
  initAuthCreds,
  makeWASocket,
  proto,
  type AuthenticationCreds,
  type SignalDataTypeMap,
  type SignalKeyStore,
  type WAMessage,
} from "baileys";
import type { IncomingMessage } from "node:http";
import type { Logger } from "@stavrobot/common";
import { SerialLock, errorMessage } from "@stavrobot/common";
import { AuthFiles } from "./auth-store.js";
import type { SocketEvents, SocketFactory, WaSocket } from "./connection.js";
import { silentPinoLogger } from "./silent-logger.js";

/** Baileys' own error: a Boom with the close code in `output.statusCode`. */
function statusCodeOf(error: unknown): number | undefined {
  const code = (error as { output?: { statusCode?: unknown } } | undefined)?.output?.statusCode;
  return typeof code === "number" ? code : undefined;
}

/**
 * An HTTP answer in place of the WebSocket upgrade, as the error Baileys closes with (its close
 * code in `output.statusCode`, as Baileys' own errors carry it).
 */
function upgradeRefused(statusCode: number): Error & { output: { statusCode: number } } {
  return Object.assign(new Error(`WhatsApp refused the WebSocket handshake (HTTP ${statusCode})`), {
    output: { statusCode },
  });
}

/**
 * The real sockets: Baileys' WhatsApp Web client over the session in `authDir` (written with
 * `AuthFiles`: atomic, with a backup of the credentials), printing nothing (a silent logger of
 * its own), its events mapped to the bridge's.
 */
export function baileysSockets(
  authDir: string,
  options: {
    version: [number, number, number] | undefined;
    logger: Logger;
    /** WhatsApp's WebSocket address instead of Baileys' own (tests: a loopback server). */
    url?: string;
  },
): { factory: SocketFactory; hasSession(): Promise<boolean>; clearSession(): Promise<void> } {
  const files = new AuthFiles(
    authDir,
    (value) => JSON.stringify(value, BufferJSON.replacer),
    (text) => JSON.parse(text, BufferJSON.reviver) as unknown,
  );
  const writes = new SerialLock();
  const pino = silentPinoLogger();

  const factory: SocketFactory = async (events: SocketEvents): Promise<WaSocket> => {
    await files.prepare();
    const creds = ((await files.readCreds()) as AuthenticationCreds | undefined) ?? initAuthCreds();
    const keys: SignalKeyStore = {
      async get(type, ids) {
        const found: { [id: string]: SignalDataTypeMap[typeof type] } = {};
        for (const id of ids) {
          let value = await files.readKey(type, id);
          if (value === undefined) continue;
          if (type === "app-state-sync-key") {
            value = proto.Message.AppStateSyncKeyData.fromObject(value as Record<string, unknown>);
          }
          found[id] = value as SignalDataTypeMap[typeof type];
        }
        return found;
      },
      async set(data) {
        await writes.run(async () => {
          for (const [type, entries] of Object.entries(data)) {
            for (const [id, value] of Object.entries(entries ?? {})) await files.writeKey(type, id, value);
          }
        });
      },
    };
    const socket = makeWASocket({
      auth: { creds, keys },
      // Baileys' pino-typed logger: this object has pino's shape and prints nothing.
      logger: pino as unknown as NonNullable<Parameters<typeof makeWASocket>[0]["logger"]>,
      ...(options.version ? { version: options.version } : {}),
      ...(options.url ? { waWebSocketUrl: options.url } : {}),
      markOnlineOnConnect: false,
      syncFullHistory: false,
    });
    socket.ev.on("creds.update", () => {
      void writes
        .run(() => files.writeCreds(creds))
        .catch((error: unknown) => {
          options.logger.error("could not save the WhatsApp session", { error: errorMessage(error) });
        });
    });
    socket.ev.on("connection.update", (update) => {
      const error = update.lastDisconnect?.error;
      events.connection({
        ...(update.connection ? { connection: update.connection } : {}),
        ...(update.qr ? { qr: update.qr } : {}),
        ...(update.connection === "close"
          ? { statusCode: statusCodeOf(error), error: error?.message ?? "connection closed" }
          : {}),
      });
    });
    socket.ev.on("messages.upsert", ({ messages, type }) => {
      if (type === "notify") events.messages(messages);
    });
    socket.ws.on("message", () => events.activity());
    // Baileys forwards the WebSocket's `unexpected-response` (an HTTP status in place of the
    // upgrade), and a listener there stops `ws` from failing the handshake itself: the socket would
    // wait forever. It ends here with the answer's status, so a 405 is `outdated` like the 405
    // WhatsApp sends after the handshake.
    socket.ws.on("unexpected-response", (_request: unknown, response: IncomingMessage) => {
      response.resume();
      void socket.end(upgradeRefused(response.statusCode ?? 500)).catch(() => undefined);
    });
    return {
      requestPairingCode: (digits) => socket.requestPairingCode(digits),
      sendMessage: async (jid, content) => {
        const sent = await socket.sendMessage(jid, content as Parameters<typeof socket.sendMessage>[1]);
        return { id: sent?.key.id };
      },
      logout: () => socket.logout(),
      end: () => void socket.end(undefined).catch(() => undefined),
      pnForLid: (lid) => socket.signalRepository.lidMapping.getPNForLID(lid),
      download: (message) =>
        downloadMediaMessage(
          message as WAMessage,
          "buffer",
          {},
          { logger: pino as never, reuploadRequest: socket.updateMediaMessage },
        ),
      ownJid: () => socket.user?.id,
    };
  };

  return {
    factory,
    async hasSession() {
      await files.prepare();
      const creds = (await files.readCreds()) as Partial<AuthenticationCreds> | undefined;
      return Boolean(creds?.me?.id);
    },
    clearSession: () => writes.run(() => files.clear()),
  };
}
