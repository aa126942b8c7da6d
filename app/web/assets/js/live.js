// The owner's live events (GET /api/events, Server-Sent Events). Each connection first catches up
// (on the first one: every answer still unseen; after a loss: what was missed since the last id),
// then `ready`, then events as they happen. The browser reconnects by itself after a network loss
// and sends the last id back; if the server refused the stream (a restart in progress, an HTTP
// error), a new one is opened after a while from the last id. Event types other than those
// handled here (`answer`, `dismissed`, `ready`) are ignored.

const REOPEN_MS = 10_000;

/**
 * Follows the stream. `onAnswer(answer, { away })`: `away` is true for what arrived before the
 * page was opened (the first connection's catch-up). `onDismissed(ids)`: notifications the owner
 * dismissed (on any page). `onState("live" | "reconnecting" | "off")`.
 */
export function followEvents({ onAnswer, onDismissed = () => {}, onState }) {
  let cursor = "";
  let firstReady = false;
  let catchingUp = true;

  const open = () => {
    const source = new EventSource(
      cursor ? `/api/events?after=${encodeURIComponent(cursor)}` : "/api/events",
    );
    source.addEventListener("open", () => {
      catchingUp = true;
    });
    source.addEventListener("answer", (event) => {
      if (event.lastEventId) cursor = event.lastEventId;
      onAnswer(JSON.parse(event.data), { away: !firstReady && catchingUp });
    });
    source.addEventListener("dismissed", (event) => {
      if (event.lastEventId) cursor = event.lastEventId;
      onDismissed(JSON.parse(event.data).ids ?? []);
    });
    source.addEventListener("ready", (event) => {
      if (event.lastEventId) cursor = event.lastEventId;
      catchingUp = false;
      firstReady = true;
      onState("live");
    });
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.CLOSED) {
        onState("reconnecting");
        return;
      }
      onState("off");
      setTimeout(open, REOPEN_MS);
    });
  };
  open();
}
