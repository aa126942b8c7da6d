import { vi } from "vitest";

export interface SseEvent {
  type: string;
  data: Record<string, unknown>;
}

export interface SseStream {
  status: number;
  headers: Headers;
  /** Every event received so far, in order. */
  events: SseEvent[];
  /** Resolves when the server ended the stream. */
  ended: Promise<void>;
  /** Waits for the first event of that type (received already or later). */
  next(type: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  close(): void;
}

/** Reads a Server-Sent Events stream as a browser's EventSource would, keeping every event. */
export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const controller = new AbortController();
  const response = await fetch(url, { headers, signal: controller.signal });
  const events: SseEvent[] = [];
  const ended = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let boundary: number;
        while ((boundary = buffer.indexOf("\n\n")) !== -1) {
          const block = buffer.slice(0, boundary);
          buffer = buffer.slice(boundary + 2);
          const event = parseBlock(block);
          if (event) events.push(event);
        }
      }
    } catch {
      // Closed by the test.
    }
  })();
  return {
    status: response.status,
    headers: response.headers,
    events,
    ended,
    async next(type, timeoutMs = 10_000) {
      return vi.waitFor(
        () => {
          const found = events.find((event) => event.type === type);
          if (!found) throw new Error(`no "${type}" event yet; got ${events.map((e) => e.type).join(", ")}`);
          return found.data;
        },
        { timeout: timeoutMs, interval: 20 },
      );
    },
    close: () => controller.abort(),
  };
}

function parseBlock(block: string): SseEvent | undefined {
  let type = "message";
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    if (line.startsWith("event: ")) type = line.slice("event: ".length);
    else if (line.startsWith("data: ")) data.push(line.slice("data: ".length));
  }
  if (data.length === 0) return undefined;
  return { type, data: JSON.parse(data.join("\n")) as Record<string, unknown> };
}
