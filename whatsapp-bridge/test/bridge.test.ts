import { describe, expect, it, vi } from "vitest";
import type { FakeApp, TestBridge } from "./helpers.js";
import { SECRET, startFakeApp, startTestBridge } from "./helpers.js";

async function withBridge(
  run: (bridge: TestBridge, app: FakeApp) => Promise<void>,
  options: { session?: boolean } = {},
): Promise<void> {
  const app = await startFakeApp();
  const bridge = await startTestBridge({ appUrl: app.url, ...options });
  try {
    await run(bridge, app);
  } finally {
    await bridge.stop();
    await app.close();
  }
}

async function opened(bridge: TestBridge): Promise<void> {
  bridge.fake.last.open();
  await vi.waitFor(() => expect(bridge.bridge.connection.current).toBe("open"));
}

const text = (id: string, remoteJid: string, body: string, extra: Record<string, unknown> = {}) => ({
  key: { id, remoteJid, fromMe: false, ...extra },
  messageTimestamp: 1_760_000_000,
  message: { conversation: body },
});

describe("the WhatsApp bridge", () => {
  it("reports its state on the open health route, with no QR code there", async () => {
    await withBridge(
      async (bridge) => {
        const health = await fetch(`${bridge.url}/health`).then((response) => response.json());
        expect(health).toMatchObject({ status: "ok", whatsapp: "unlinked" });
        const link = await bridge.request("POST", "/link", { method: "qr" });
        expect(link.status).toBe(200);
        bridge.fake.last.qr("2@abc,def");
        await vi.waitFor(async () =>
          expect((await bridge.request("GET", "/link")).body).toMatchObject({
            whatsapp: "qr",
            qr: "2@abc,def",
          }),
        );
        const after = await fetch(`${bridge.url}/health`).then((response) => response.json());
        expect(after).toMatchObject({ whatsapp: "qr" });
        expect(JSON.stringify(after)).not.toContain("2@abc");
      },
      { session: false },
    );
  });

  it("streams the state as server-sent events: at once, then at every change", async () => {
    await withBridge(
      async (bridge) => {
        const abort = new AbortController();
        const response = await fetch(`${bridge.url}/events`, {
          headers: { Authorization: `Bearer ${SECRET}` },
          signal: abort.signal,
        });
        expect(response.headers.get("content-type")).toBe("text/event-stream");
        const reader = response.body!.getReader();
        const decoder = new TextDecoder();
        let text = "";
        const states = () =>
          [...text.matchAll(/^data: (.*)$/gm)].map(
            (match) => JSON.parse(match[1]!) as Record<string, unknown>,
          );
        const readUntil = async (count: number) => {
          while (states().length < count) {
            const { value, done } = await reader.read();
            if (done) throw new Error("the stream ended");
            text += decoder.decode(value, { stream: true });
          }
        };
        await readUntil(1);
        expect(states()[0]).toMatchObject({ whatsapp: "unlinked" });
        await bridge.request("POST", "/link", { method: "qr" });
        bridge.fake.last.qr("2@streamed");
        await readUntil(3);
        expect(states().map((state) => state.whatsapp)).toEqual(["unlinked", "connecting", "qr"]);
        expect(states()[2]).toMatchObject({ qr: "2@streamed" });
        abort.abort();
        const unauthorised = await fetch(`${bridge.url}/events`);
        expect(unauthorised.status).toBe(401);
      },
      { session: false },
    );
  });

  it("refuses bad link requests with a clear error", async () => {
    await withBridge(
      async (bridge) => {
        const bad = await bridge.request("POST", "/link", { method: "code", phoneNumber: "0123" });
        expect(bad.status).toBe(400);
        expect(JSON.stringify(bad.body)).toContain("E.164");
        const unknown = await bridge.request("POST", "/link", { method: "carrier-pigeon" });
        expect(unknown.status).toBe(400);
      },
      { session: false },
    );
  });

  it("answers 503 to a send while not open, and sends Markdown as WhatsApp's formatting once open", async () => {
    await withBridge(async (bridge) => {
      const early = await bridge.request("POST", "/send", { recipient: "+15550001234", message: "hi" });
      expect(early.status).toBe(503);
      expect(early.body).toMatchObject({ error: expect.stringMatching(/^WhatsApp is connecting/) });
      await opened(bridge);
      const sent = await bridge.request("POST", "/send", {
        recipient: "+15550001234",
        message: "# Plan\n\n**Bold**, *italic*, ~~gone~~ and [a link](https://example.com).",
      });
      expect(sent).toEqual({ status: 200, body: { ok: true, ids: ["id-1"] } });
      expect(bridge.fake.last.sent).toEqual([
        {
          jid: "15550001234@s.whatsapp.net",
          content: { text: "*Plan*\n\n*Bold*, _italic_, ~gone~ and a link (https://example.com)." },
        },
      ]);
    });
  });

  it("sends an image with the text as its caption, and a document by its name", async () => {
    await withBridge(async (bridge) => {
      await opened(bridge);
      const png = Buffer.from("png-bytes").toString("base64");
      await bridge.request("POST", "/send", {
        recipient: "+15550001234",
        message: "look",
        attachment: png,
        attachmentFilename: "chart.png",
      });
      await bridge.request("POST", "/send", {
        recipient: "+15550001234",
        attachment: png,
        attachmentFilename: "../notes.txt",
      });
      const [image, document] = bridge.fake.last.sent.map((sent) => sent.content);
      expect(image).toMatchObject({ mimetype: "image/png", caption: "look" });
      expect(Buffer.isBuffer(image!.image)).toBe(true);
      expect(document).toMatchObject({ mimetype: "text/plain", fileName: "notes.txt" });
      expect(document).not.toHaveProperty("caption");
    });
  });

  it("refuses a bad send with a clear error", async () => {
    await withBridge(async (bridge) => {
      await opened(bridge);
      const bad = await bridge.request("POST", "/send", { recipient: "15550001234", message: "x" });
      expect(bad.status).toBe(400);
      const empty = await bridge.request("POST", "/send", { recipient: "+15550001234" });
      expect(empty.status).toBe(400);
      expect(JSON.stringify(empty.body)).toContain("At least one of 'message' or 'attachment'");
    });
  });

  it("hands direct messages to the app as E.164 senders, resolving @lid, and skips the rest", async () => {
    await withBridge(async (bridge, app) => {
      await opened(bridge);
      bridge.fake.lids.set("1234567890@lid", "15550002222@s.whatsapp.net");
      bridge.fake.last.receive(
        text("m1", "15550001111@s.whatsapp.net", "*hello* there"),
        text("m2", "999@lid", "alt given", { remoteJidAlt: "15550003333@s.whatsapp.net" }),
        text("m3", "1234567890@lid", "looked up"),
        text("m4", "555@lid", "nobody knows this one"),
        text("m5", "120363000000@g.us", "a group"),
        text("m6", "status@broadcast", "a status"),
        {
          ...text("m7", "15550001111@s.whatsapp.net", "mine"),
          key: { id: "m7", remoteJid: "15550001111@s.whatsapp.net", fromMe: true },
        },
      );
      await vi.waitFor(() => expect(app.messages).toHaveLength(3));
      expect(app.messages.map(({ source, sender, message }) => ({ source, sender, message }))).toEqual([
        { source: "whatsapp", sender: "+15550001111", message: "**hello** there" },
        { source: "whatsapp", sender: "+15550003333", message: "alt given" },
        { source: "whatsapp", sender: "+15550002222", message: "looked up" },
      ]);
      const health = (await fetch(`${bridge.url}/health`).then((response) => response.json())) as {
        lastInbound?: string;
      };
      expect(health.lastInbound).toMatch(/^\d{4}-\d\d-\d\dT/);
    });
  });

  it("forwards media (a voice note, an image with its caption, a document) and says what it could not fetch", async () => {
    await withBridge(async (bridge, app) => {
      await opened(bridge);
      bridge.fake.media.set("v1", Buffer.from("ogg-bytes"));
      bridge.fake.media.set("i1", Buffer.from("jpg-bytes"));
      bridge.fake.media.set("d1", Buffer.from("pdf-bytes"));
      const from = "15550001111@s.whatsapp.net";
      bridge.fake.last.receive(
        {
          key: { id: "v1", remoteJid: from },
          message: { audioMessage: { mimetype: "audio/ogg; codecs=opus", ptt: true } },
        },
        {
          key: { id: "i1", remoteJid: from },
          message: { imageMessage: { mimetype: "image/jpeg", caption: "my cat" } },
        },
        {
          key: { id: "d1", remoteJid: from },
          message: {
            documentWithCaptionMessage: {
              message: { documentMessage: { mimetype: "application/pdf", fileName: "../bill.pdf" } },
            },
          },
        },
        { key: { id: "gone", remoteJid: from }, message: { videoMessage: { mimetype: "video/mp4" } } },
        {
          key: { id: "big", remoteJid: from },
          message: { videoMessage: { mimetype: "video/mp4", fileLength: 50 * 1024 * 1024 } },
        },
      );
      await vi.waitFor(() => expect(app.messages).toHaveLength(5));
      const [voice, image, document, gone, big] = app.messages;
      expect(voice!.files).toEqual([
        {
          data: Buffer.from("ogg-bytes").toString("base64"),
          filename: "voice-note.ogg",
          mimeType: "audio/ogg",
        },
      ]);
      expect(image).toMatchObject({
        message: "my cat",
        files: [{ filename: "image.jpg", mimeType: "image/jpeg" }],
      });
      expect(document!.files![0]).toMatchObject({ filename: "bill.pdf", mimeType: "application/pdf" });
      expect(gone!.message).toBe(
        '(Attachment "video.mp4" was not forwarded: it could not be downloaded: media expired.)',
      );
      expect(big!.message).toBe('(Attachment "video.mp4" was not forwarded: larger than 10 MB.)');
    });
  });

  it("keeps received messages on disk until the app takes them, with one idempotency key per message", async () => {
    const app = await startFakeApp({ statuses: [503, 503] });
    const bridge = await startTestBridge({ appUrl: app.url });
    try {
      await opened(bridge);
      const message = text("same", "15550001111@s.whatsapp.net", "once");
      bridge.fake.last.receive(message);
      bridge.fake.last.receive(message);
      await vi.waitFor(() => expect(app.answered).toContain(202));
      const keys = new Set(app.messages.map((sent) => sent.idempotencyKey));
      expect(keys.size).toBe(1);
    } finally {
      await bridge.stop();
      await app.close();
    }
  });
});
