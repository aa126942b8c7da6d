import type { ServerResponse } from "node:http";
import type { TurnProgress } from "../live/progress.js";
import { EVENT_STREAM_HEADERS, formatEvent } from "./events.js";

/**
 * `POST /chat` as Server-Sent Events, for a client that asks (`Accept: text/event-stream`): the
 * turn's progress as it happens (`text` {delta} as the model writes, `tool` {name} as a tool
 * starts, `progress` {plugin, tool, progress, total?, message?} as a tool says how far it got,
 * `retry` {attempt, of, reason, inSeconds} before the queue tries again), then one last
 * event: `answer` with exactly the JSON a plain request gets, or `error` {error, saved} when the
 * database went away (the message is saved and runs later). Any other client gets plain JSON.
 */
export function wantsEvents(accept: string | undefined): boolean {
  return /(^|,)\s*text\/event-stream\b/i.test(accept ?? "");
}

export interface TurnEvents {
  /** Stops hearing the turn's progress. */
  unfollow(): void;
  /** Writes the last event and ends the response; the handler has answered by itself then. */
  end(type: "answer" | "error", data: object): undefined;
}

export function openTurnEvents(res: ServerResponse, progress: TurnProgress, inboxId: number): TurnEvents {
  res.writeHead(200, EVENT_STREAM_HEADERS);
  const write = (type: string, data: object) => {
    if (!res.writableEnded && !res.destroyed) res.write(formatEvent(type, data));
  };
  // The first event says the message is saved: from here on it runs whatever happens.
  write("accepted", { id: inboxId });
  const unfollow = progress.listen(inboxId, (event) => {
    const { type, ...data } = event;
    write(type, data);
  });
  res.once("close", unfollow);
  return {
    unfollow,
    end(type, data) {
      unfollow();
      write(type, data);
      res.end();
      return undefined;
    },
  };
}
