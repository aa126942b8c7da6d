import { request, type IncomingHttpHeaders } from "node:http";
import { vi } from "vitest";

export interface StreamEvent {
  type: string;
  /** The event's own `id:` line, when it had one. */
  id: string | undefined;
  data: Record<string, unknown>;
}

export interface EventStreamClient {
  status: number;
  headers: IncomingHttpHeaders;
  /** Every event received so far, in order. */
  events: StreamEvent[];
  /** Comment lines received (heartbeats), without the colon. */
  comments: string[];
  /** The last event id received, as a browser's EventSource would send it back. */
  lastId: string | undefined;
  /** `end` when the server ended the stream properly, `aborted` when the connection broke. */
  ended: Promise<"end" | "aborted">;
  /** Waits until `check` passes (it throws, e.g. an `expect`, until the events satisfy it). */
  until<T>(check: (events: StreamEvent[]) => T, timeoutMs?: number): Promise<T>;
  /** Waits for the first event of a type (received already or later). */
  first(type: string, timeoutMs?: number): Promise<StreamEvent>;
  /** Events of one type, in order. */
  of(type: string): StreamEvent[];
  /** Stops reading (what the server sends piles up in the socket, then in the server). */
  pause(): void;
  close(): void;
}

/**
 * A Server-Sent Events client on node:http, reading the stream as the specification says: fields
 * per line, an event per blank line, `id` kept across events, comments apart.
 */
export function openEventStream(
  url: string,
  headers: Record<string, string> = {},
): Promise<EventStreamClient> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { Accept: "text/event-stream", ...headers } }, (res) => {
      const client: EventStreamClient = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        comments: [],
        lastId: undefined,
        ended: new Promise((settle) => {
          res.on("end", () => settle("end"));
          res.on("aborted", () => settle("aborted"));
          res.on("error", () => settle("aborted"));
        }),
        until: (check, timeoutMs = 15_000) =>
          vi.waitFor(() => check(client.events), { timeout: timeoutMs, interval: 20 }),
        first: (type, timeoutMs) =>
          client.until((events) => {
            const found = events.find((event) => event.type === type);
            if (!found)
              throw new Error(`no "${type}" event yet; got ${events.map((e) => e.type).join(", ")}`);
            return found;
          }, timeoutMs),
        of: (type) => client.events.filter((event) => event.type === type),
        pause: () => void res.pause(),
        close: () => req.destroy(),
      };
      let buffer = "";
      let type = "";
      let id: string | undefined;
      let data: string[] = [];
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        buffer += chunk;
        let newline: number;
        while ((newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
          if (line === "") {
            if (data.length > 0) {
              client.events.push({
                type: type || "message",
                id,
                data: JSON.parse(data.join("\n")) as Record<string, unknown>,
              });
            }
            type = "";
            id = undefined;
            data = [];
            continue;
          }
          if (line.startsWith(":")) {
            client.comments.push(line.slice(1).trim());
            continue;
          }
          const colon = line.indexOf(":");
          const field = colon === -1 ? line : line.slice(0, colon);
          const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") type = value;
          else if (field === "data") data.push(value);
          else if (field === "id") {
            id = value;
            client.lastId = value;
          }
        }
      });
      resolve(client);
    });
    req.on("error", reject);
    req.end();
  });
}
