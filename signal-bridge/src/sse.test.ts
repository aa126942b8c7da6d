import { describe, expect, it } from "vitest";
import { SseParser } from "./sse.js";

describe("SseParser", () => {
  it("reads signal-cli's fields without a space after the colon, and the spaced form alike", () => {
    const parser = new SseParser();
    const events = parser.push(
      'id:1700-1\nevent:receive\ndata:{"a":1}\n\n' + 'id: 1700-2\nevent: receive\ndata: {"a":2}\n\n',
    );
    expect(events).toEqual([
      { event: "receive", data: '{"a":1}', id: "1700-1" },
      { event: "receive", data: '{"a":2}', id: "1700-2" },
    ]);
    expect(parser.lastEventId).toBe("1700-2");
  });

  it("drops only one leading space of a value", () => {
    expect(new SseParser().push("data:  two spaces\n\n")).toEqual([
      { event: "message", data: " two spaces", id: undefined },
    ]);
  });

  it("assembles events split anywhere across chunks, with CRLF or CR line ends", () => {
    const parser = new SseParser();
    const text = "event:receive\r\ndata:line one\r\ndata:line two\r\n\r\nid:7\rdata:x\r\r";
    const events = [];
    for (const char of text) events.push(...parser.push(char));
    expect(events).toEqual([
      { event: "receive", data: "line one\nline two", id: undefined },
      { event: "message", data: "x", id: "7" },
    ]);
  });

  it("ignores keep-alive comments, unknown fields and blocks without data, and keeps the last id", () => {
    const parser = new SseParser();
    expect(parser.push(":\n:\nretry:100\nid:9\n\nevent:receive\n\n")).toEqual([]);
    expect(parser.lastEventId).toBe("9");
    expect(parser.push("event:receive\ndata:{}\n\n")).toEqual([{ event: "receive", data: "{}", id: "9" }]);
  });

  it("skips a byte-order mark at the start and waits for the blank line before dispatching", () => {
    const parser = new SseParser();
    expect(parser.push("\uFEFFevent:receive\ndata:{}\n")).toEqual([]);
    expect(parser.push("\n")).toEqual([{ event: "receive", data: "{}", id: undefined }]);
  });
});
