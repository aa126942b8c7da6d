import type { IncomingMessage, ServerResponse } from "node:http";
import { HttpError, errorMessage, type Logger, type Router } from "@stavrobot/common";
import { CHANNEL_SOURCES } from "../audience.js";
import type { InboxStore, UnseenAnswer } from "../db/inbox.js";
import { ANSWER_EVENT, type LiveEvents, type Published } from "../live/events.js";

/** Ends the catch-up of a connection: what follows is live. */
export const READY_EVENT = "ready";

/** A comment line every so often keeps proxies from closing a quiet stream. */
const HEARTBEAT_MS = 15_000;
/** At most this many kept answers are sent when a client connects without a known cursor. */
const BACKLOG_LIMIT = 100;
/** A client that stopped reading is dropped rather than buffered for without end. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

export interface EventRouteDeps {
  live: LiveEvents;
  inbox: Pick<InboxStore, "unseenAnswers" | "stillUnseen">;
  logger: Logger;
  /** Default 15 s. */
  heartbeatMs?: number;
}

/**
 * `GET /api/events` (owner's password): Server-Sent Events for the owner's open consoles. Each
 * event has a type (`answer` today; clients ignore types they do not know) and JSON data. A
 * connection first catches up, then follows live:
 * - without a cursor (or with one this start does not know): every answer still unseen, oldest
 *   first (at most 100), without ids;
 * - with a cursor (`Last-Event-ID`, or `?after=` for a client that cannot set it): the events
 *   published after it, answers only while still unseen, each with its own id;
 * then `ready` (`{missed}`, with the cursor of the catch-up), then every event as it is published.
 */
export function addEventRoutes(router: Router, deps: EventRouteDeps): void {
  router.get("/api/events", async ({ req, res, url }) => {
    if (deps.live.closed) throw new HttpError(503, "The assistant is stopping.");
    await streamEvents(deps, req, res, url);
    return undefined;
  });
}

async function streamEvents(
  deps: EventRouteDeps,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  const { live, inbox } = deps;
  const header = req.headers["last-event-id"];
  const after = live.position(
    (Array.isArray(header) ? header[0] : header) ?? url.searchParams.get("after") ?? undefined,
  );
  // Listen before reading the catch-up, holding what is published meanwhile: nothing falls
  // between the two.
  const held: Published[] = [];
  let following = false;
  /** Answers the catch-up sent from the database: their event, if it comes, is not sent again. */
  const caughtUp = new Set<number>();
  const write = (text: string): void => {
    if (res.writableEnded || res.destroyed) return;
    res.write(text);
    if (res.writableLength > MAX_BUFFERED_BYTES) res.destroy();
  };
  const send = (published: Published): void => {
    const { type, data } = published.event;
    if (type === ANSWER_EVENT && caughtUp.has((data as UnseenAnswer).id)) return;
    write(formatEvent(type, data, live.cursor(published.seq)));
  };
  const unsubscribe = live.subscribe((published) => (following ? send(published) : held.push(published)));
  const until = live.latest;
  const heartbeat = setInterval(() => write(": keep-alive\n\n"), deps.heartbeatMs ?? HEARTBEAT_MS);
  heartbeat.unref();
  let ended = false;
  let forget = (): void => undefined;
  const end = (): void => {
    if (ended) return;
    ended = true;
    clearInterval(heartbeat);
    unsubscribe();
    forget();
    if (!res.writableEnded) res.end();
  };
  forget = live.onClose(end) || forget;
  res.on("close", end);
  // The app stopped in between (the caller checked just before): ended already.
  if (ended) return;
  res.writeHead(200, EVENT_STREAM_HEADERS);
  // A client that loses the stream tries again after 3 s, with the last id it received.
  write("retry: 3000\n\n");

  let missed = 0;
  try {
    if (after === undefined) {
      const unseen = await inbox.unseenAnswers({ owner: true }, 2 ** 31 - 1, CHANNEL_SOURCES, BACKLOG_LIMIT);
      for (const answer of unseen) {
        caughtUp.add(answer.id);
        write(formatEvent(ANSWER_EVENT, answer));
      }
      missed = unseen.length;
    } else {
      const since = live.between(after, until);
      const answerIds = since
        .filter((published) => published.event.type === ANSWER_EVENT)
        .map((published) => (published.event.data as UnseenAnswer).id);
      const unseen = await inbox.stillUnseen(answerIds);
      for (const published of since) {
        const { type, data } = published.event;
        if (type === ANSWER_EVENT && !unseen.has((data as UnseenAnswer).id)) continue;
        if (type === ANSWER_EVENT) missed++;
        write(formatEvent(type, data, live.cursor(published.seq)));
      }
    }
  } catch (error) {
    // The database is away: the client reconnects (with the cursor it had) and catches up then.
    deps.logger.warn("could not read the answers kept for the owner", { error: errorMessage(error) });
    end();
    return;
  }
  if (ended) return;
  write(formatEvent(READY_EVENT, { missed }, live.cursor(until)));
  following = true;
  for (const published of held) send(published);
  held.length = 0;
}

/** The headers of a Server-Sent Events answer. */
export const EVENT_STREAM_HEADERS = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-store",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  // Proxies such as nginx would otherwise hold the events back.
  "X-Accel-Buffering": "no",
} as const;

/** One Server-Sent Event. */
export function formatEvent(type: string, data: object, id?: string): string {
  // JSON has no raw newlines, so the data is one `data:` line.
  return `event: ${type}\n${id === undefined ? "" : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`;
}
