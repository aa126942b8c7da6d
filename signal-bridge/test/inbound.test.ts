import { readdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { FakeApp, TestBridge } from "./helpers.js";
import { SECRET, startListeningBridge } from "./helpers.js";

const alice = "+15550002222";

describe("inbound Signal messages", () => {
  let app: FakeApp;
  let bridge: TestBridge;
  let stop: () => Promise<void>;
  beforeAll(async () => ({ app, bridge, stop } = await startListeningBridge()));
  afterAll(() => stop());

  /** The messages the app received from `sender`, waiting until there are `count`. */
  async function received(sender: string, count: number) {
    await vi.waitFor(() => expect(app.messages.filter((m) => m.sender === sender)).toHaveLength(count), {
      timeout: 10_000,
    });
    return app.messages.filter((m) => m.sender === sender);
  }

  it("delivers text with Signal styles as Markdown, counting offsets after emoji and Greek in UTF-16", async () => {
    // "😀" is two UTF-16 code units, each Greek letter one: "bold" starts at 13, "italic" at 22.
    const text = "😀 Καλημέρα! bold and italic `x`";
    await bridge.inbound({
      source: alice,
      message: text,
      textStyles: [
        { start: 13, length: 4, style: "BOLD" },
        { start: 22, length: 6, style: "ITALIC" },
        { start: 7, length: 4, style: "SPOILER" },
      ],
    });
    const [message] = await received(alice, 1);
    expect(message).toMatchObject({
      source: "signal",
      sender: alice,
      message: "😀 Καλη<spoiler>μέρα</spoiler>! **bold** and _italic_ `x`",
      idempotencyKey: expect.stringMatching(/^signal-bridge:\d{15}-signal-[0-9a-f]{16}-1$/),
    });
    expect(message?.files).toBeUndefined();
    expect(app.authorizations.at(-1)).toBe(`Bearer ${SECRET}`);
  });

  it("delivers an image and a voice note as base64 files with their names and types, then drops signal-cli's copies", async () => {
    const bob = "+447700900123";
    const photo = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 1, 2, 3, 4]);
    const voice = Buffer.from("fake aac voice note");
    const document = Buffer.from("%PDF-1.7 fake");
    await bridge.inbound({
      source: bob,
      message: "look",
      attachments: [
        { filename: "holiday.jpg", contentType: "image/jpeg", data: photo.toString("base64") },
        { filename: null, contentType: "application/pdf", data: document.toString("base64") },
      ],
    });
    await bridge.inbound({
      source: bob,
      voiceNote: true,
      attachments: [{ contentType: "audio/aac", data: voice.toString("base64") }],
    });
    const [withPhoto, withVoice] = await received(bob, 2);
    expect(withPhoto?.message).toBe("look");
    expect(withPhoto?.files).toEqual([
      { filename: "holiday.jpg", mimeType: "image/jpeg", data: photo.toString("base64") },
      {
        filename: expect.stringMatching(/^[A-Za-z0-9_-]{20}\.pdf$/),
        mimeType: "application/pdf",
        data: document.toString("base64"),
      },
    ]);
    expect(withVoice?.message).toBeUndefined();
    expect(withVoice?.files).toEqual([
      { filename: "voice-note.aac", mimeType: "audio/aac", data: voice.toString("base64") },
    ]);
    // The outbox holds the bytes now; signal-cli's attachments directory does not keep growing.
    const stored = join(bridge.config.signalCliConfigDir, "attachments");
    await vi.waitFor(() => expect(readdirSync(stored)).toEqual([]), { timeout: 10_000 });
  });

  it("skips a file over 10 MB with a note and still forwards the rest", async () => {
    const carol = "+15550003333";
    const big = Buffer.alloc(10 * 1024 * 1024 + 1, 7);
    await bridge.inbound({
      source: carol,
      message: "two files",
      attachments: [
        { filename: "huge.mov", contentType: "video/quicktime", data: big.toString("base64") },
        { filename: "small.txt", contentType: "text/plain", data: Buffer.from("hi").toString("base64") },
      ],
    });
    const [message] = await received(carol, 1);
    expect(message?.message).toBe(
      'two files\n\n(Attachment "huge.mov" was not forwarded: larger than 10 MB.)',
    );
    expect(message?.files?.map((file) => file.filename)).toEqual(["small.txt"]);
    // The skipped file stays where signal-cli put it.
    const stored = join(bridge.config.signalCliConfigDir, "attachments");
    expect(readdirSync(stored).filter((name) => name.endsWith(".mov"))).toHaveLength(1);
  });

  it("ignores receipts, typing, sync and group messages, and forwards any sender (the app decides)", async () => {
    const dave = "+15550004444";
    const base = { source: dave, sourceNumber: dave, sourceDevice: 1, timestamp: 1_700_000_000_000 };
    await bridge.control("/test/envelope", { ...base, receiptMessage: { isRead: true, timestamps: [1] } });
    await bridge.control("/test/envelope", { ...base, typingMessage: { action: "STARTED" } });
    await bridge.control("/test/envelope", {
      ...base,
      syncMessage: { sentMessage: { destinationNumber: alice, message: "from my phone" } },
    });
    await bridge.control("/test/envelope", {
      ...base,
      dataMessage: { timestamp: 1, message: "hello group", groupInfo: { groupId: "g", type: "DELIVER" } },
    });
    await bridge.control("/test/envelope", {
      ...base,
      dataMessage: { timestamp: 2, message: null, reaction: {} },
    });
    await bridge.inbound({ source: dave, message: "only this one" });
    const [message] = await received(dave, 1);
    expect(message?.message).toBe("only this one");
    // The others are dropped, not merely late.
    await sleep(300);
    expect(app.messages.filter((m) => m.sender === dave)).toHaveLength(1);
  });
});
