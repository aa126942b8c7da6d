/**
 * The REPL's side of `GET /api/events`: follows the stream while the session is open, reconnecting
 * with the last cursor it received, and hands over each answer kept for the owner once.
 */
import { basicAuthHeader } from "@stavrobot/common";
import { readEvents } from "./sse.js";

/** An answer kept for the owner, as `GET /api/answers/pending` and the `answer` event carry it. */
export interface KeptAnswer {
  id: number;
  source: string | null;
  message: string;
  response: string;
  /** In the owner's words (a reminder's note), when it has one. */
  title?: string | undefined;
}

export interface FollowOptions {
  baseUrl: string;
  password: string;
  /** Each answer that arrives after the first catch-up (or after it was given up on). */
  onAnswer: (answer: KeptAnswer) => void;
  /** How long to wait between attempts at first (the server's `retry:` replaces it); doubles to 30 s. */
  retryMs?: number;
}

export interface Following {
  /**
   * The answers of the first catch-up: what arrived while no console was open. Undefined when the
   * server has no event stream (an older app: 404), refused the password, could not be reached, or
   * `giveUp` was called first; answers that come later go to `onAnswer`.
   */
  caughtUp: Promise<KeptAnswer[] | undefined>;
  /** Stops waiting for the first catch-up (it is settled undefined); the stream goes on. */
  giveUp(): void;
  close(): void;
}

const MAX_RETRY_MS = 30_000;

export function followAnswers(options: FollowOptions): Following {
  const base = options.baseUrl.replace(/\/+$/, "");
  const controller = new AbortController();
  /** Answers handed over in this session (a reconnect's catch-up may bring them again). */
  const shown = new Set<number>();
  let settle: (answers: KeptAnswer[] | undefined) => void = () => undefined;
  let waitingFirst = true;
  const caughtUp = new Promise<KeptAnswer[] | undefined>((resolve) => (settle = resolve));
  const giveUp = (): void => {
    if (!waitingFirst) return;
    waitingFirst = false;
    settle(undefined);
  };
  const fresh = (answers: KeptAnswer[]): KeptAnswer[] => {
    const unseen = answers.filter((answer) => !shown.has(answer.id));
    for (const answer of unseen) shown.add(answer.id);
    return unseen;
  };

  const run = async (): Promise<void> => {
    let cursor: string | undefined;
    let delay = options.retryMs ?? 3_000;
    let wait = delay;
    while (!controller.signal.aborted) {
      try {
        const response = await fetch(`${base}/api/events`, {
          headers: {
            Accept: "text/event-stream",
            Authorization: basicAuthHeader(options.password),
            ...(cursor ? { "Last-Event-ID": cursor } : {}),
          },
          signal: controller.signal,
        });
        // No stream here (an older app), or not ours to read: asking again will not change that.
        if (response.status >= 400 && response.status < 500) {
          await response.body?.cancel();
          giveUp();
          return;
        }
        if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
        let catchUp: KeptAnswer[] | undefined = [];
        for await (const event of readEvents(response.body)) {
          if (event.retry !== undefined) delay = event.retry;
          if (event.id !== undefined) cursor = event.id;
          if (event.type === "answer") {
            const answer = JSON.parse(event.data) as KeptAnswer;
            if (catchUp && waitingFirst) catchUp.push(answer);
            else for (const one of fresh([answer])) options.onAnswer(one);
          } else if (event.type === "ready") {
            // Connected and caught up: the next loss starts its waits afresh.
            wait = delay;
            if (catchUp && waitingFirst) {
              waitingFirst = false;
              settle(fresh(catchUp));
            } else if (catchUp) {
              // The session stopped waiting for it (`giveUp`) while it arrived.
              for (const one of fresh(catchUp)) options.onAnswer(one);
            }
            catchUp = undefined;
          }
          // Other types are for other clients.
        }
      } catch {
        // Unreachable, cut, or closed by us: tried again below unless closed.
      }
      if (controller.signal.aborted) break;
      // The session goes on without the first catch-up; a later one comes through `onAnswer`.
      giveUp();
      await sleep(wait, controller.signal);
      wait = Math.min(Math.max(wait * 2, delay), MAX_RETRY_MS);
    }
    giveUp();
  };
  void run();
  return {
    caughtUp,
    giveUp,
    close: () => {
      controller.abort();
      giveUp();
    },
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
