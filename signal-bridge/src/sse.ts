/**
 * A Server-Sent Events parser (the WHATWG "event stream interpretation"), fed text as it arrives.
 * signal-cli writes `id:…\nevent:receive\ndata:…\n\n` with NO space after the colons, while the
 * spec's usual form has one; both are the same field (one leading space is dropped, not more).
 * Lines end in LF, CRLF or CR; a line starting with `:` is a comment (signal-cli's keep-alive).
 */

export interface SseEvent {
  /** `message` when the event names no type. */
  event: string;
  data: string;
  /** The last `id` seen on the stream so far (ids persist across events, per the spec). */
  id: string | undefined;
}

export class SseParser {
  private buffer = "";
  private started = false;
  private eventType = "";
  private dataLines: string[] = [];
  private hasData = false;
  /** The last chunk ended in CR: a LF starting the next one belongs to it. */
  private afterCr = false;
  /** The stream's last event id: sent back as `Last-Event-ID` when reconnecting. */
  lastEventId: string | undefined;

  /** Feeds decoded text; returns the events completed by it. */
  push(text: string): SseEvent[] {
    if (this.afterCr && text.startsWith("\n")) text = text.slice(1);
    this.afterCr = false;
    this.buffer += text;
    if (!this.started && this.buffer.length > 0) {
      this.started = true;
      if (this.buffer.startsWith("\uFEFF")) this.buffer = this.buffer.slice(1);
    }
    const events: SseEvent[] = [];
    for (;;) {
      const end = this.buffer.search(/[\r\n]/);
      if (end < 0) break;
      const line = this.buffer.slice(0, end);
      let skip = 1;
      if (this.buffer[end] === "\r") {
        if (end === this.buffer.length - 1)
          this.afterCr = true; // its LF may come with the next chunk
        else if (this.buffer[end + 1] === "\n") skip = 2;
      }
      this.buffer = this.buffer.slice(end + skip);
      const event = this.line(line);
      if (event) events.push(event);
    }
    return events;
  }

  private line(line: string): SseEvent | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.eventType = value;
    else if (field === "data") {
      this.dataLines.push(value);
      this.hasData = true;
    } else if (field === "id" && !value.includes("\0")) this.lastEventId = value;
    return undefined;
  }

  private dispatch(): SseEvent | undefined {
    const event = this.hasData
      ? { event: this.eventType || "message", data: this.dataLines.join("\n"), id: this.lastEventId }
      : undefined;
    this.eventType = "";
    this.dataLines = [];
    this.hasData = false;
    return event;
  }
}
