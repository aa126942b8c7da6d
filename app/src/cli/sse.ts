/** One event of a Server-Sent Events stream. */
export interface StreamEvent {
  type: string;
  id: string | undefined;
  data: string;
  retry: number | undefined;
}

/** The events of a Server-Sent Events body, as the specification splits them. */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<StreamEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event: StreamEvent = { type: "", id: undefined, data: "", retry: undefined };
  let data: string[] = [];
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
      if (line === "") {
        if (data.length > 0 || event.retry !== undefined)
          yield { ...event, type: event.type || "message", data: data.join("\n") };
        event = { type: "", id: undefined, data: "", retry: undefined };
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event.type = value;
      else if (field === "data") data.push(value);
      else if (field === "id") event.id = value;
      else if (field === "retry" && /^\d+$/.test(value)) event.retry = Number(value);
    }
  }
}
