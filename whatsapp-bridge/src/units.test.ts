import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AuthFiles, keyFileName } from "./auth-store.js";
import { markdownToWhatsApp, whatsAppToMarkdown } from "./format.js";
import { e164ToJid, jidToE164 } from "./jid.js";
import { silentPinoLogger } from "./silent-logger.js";

describe("Markdown and WhatsApp's formatting", () => {
  it("turns Markdown into WhatsApp's markers", () => {
    expect(markdownToWhatsApp("**bold** and *it* and ~~del~~ and `code`")).toBe(
      "*bold* and _it_ and ~del~ and `code`",
    );
    expect(markdownToWhatsApp("## Title\n\n- one\n- two\n\n1. a\n2. b")).toBe(
      "*Title*\n\n- one\n- two\n\n1. a\n2. b",
    );
    expect(markdownToWhatsApp("```\nlet x = 1;\n```")).toBe("```\nlet x = 1;\n```");
    expect(markdownToWhatsApp("> quoted\n\n[site](https://a.example) <https://b.example>")).toBe(
      "> quoted\n\nsite (https://a.example) https://b.example",
    );
    expect(markdownToWhatsApp("Tom &amp; Jerry <3")).toBe("Tom & Jerry <3");
  });

  it("turns what people write into Markdown", () => {
    expect(whatsAppToMarkdown("*bold* _it_ ~del~ 2*3*4")).toBe("**bold** *it* ~~del~~ 2*3*4");
    expect(whatsAppToMarkdown("snake_case_name stays")).toBe("snake_case_name stays");
  });
});

describe("JIDs", () => {
  it("maps phone-number JIDs to E.164 and back; anything else is no number", () => {
    expect(jidToE164("15550001111@s.whatsapp.net")).toBe("+15550001111");
    expect(jidToE164("15550001111:12@s.whatsapp.net")).toBe("+15550001111");
    expect(jidToE164("123@lid")).toBeUndefined();
    expect(jidToE164("120363@g.us")).toBeUndefined();
    expect(jidToE164("0123@s.whatsapp.net")).toBeUndefined();
    expect(e164ToJid("+15550001111")).toBe("15550001111@s.whatsapp.net");
  });
});

describe("the session's files", () => {
  it("writes atomically, keeps the previous credentials, and reads the backup when the file is broken", async () => {
    const dir = await mkdtemp(join(tmpdir(), "whatsapp-auth-"));
    try {
      const files = new AuthFiles(
        join(dir, "auth"),
        (value) => JSON.stringify(value),
        (text) => JSON.parse(text) as unknown,
      );
      await files.prepare();
      expect(await files.readCreds()).toBeUndefined();
      await files.writeCreds({ me: { id: "1" }, round: 1 });
      await files.writeCreds({ me: { id: "1" }, round: 2 });
      expect(JSON.parse(await readFile(join(dir, "auth", "creds.json.bak"), "utf8"))).toEqual({
        me: { id: "1" },
        round: 1,
      });
      // A torn write (what an atomic rename rules out, but a disk may still do): the backup is read.
      await writeFile(join(dir, "auth", "creds.json"), '{"me":');
      expect(await files.readCreds()).toEqual({ me: { id: "1" }, round: 1 });
      // A broken file never replaces a good backup.
      await files.writeCreds({ me: { id: "1" }, round: 3 });
      expect(JSON.parse(await readFile(join(dir, "auth", "creds.json.bak"), "utf8"))).toMatchObject({
        round: 1,
      });

      await files.writeKey("pre-key", "7", { key: "k" });
      expect(await files.readKey("pre-key", "7")).toEqual({ key: "k" });
      await files.writeKey("pre-key", "7", null);
      expect(await files.readKey("pre-key", "7")).toBeUndefined();
      expect((await readdir(join(dir, "auth"))).filter((name) => name.startsWith(".tmp-"))).toEqual([]);

      await files.clear();
      expect(await readdir(join(dir, "auth"))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("names key files without path characters", () => {
    expect(keyFileName("session", "../../etc/x:1")).toBe("session-.._.._etc_x_1.json");
  });
});

describe("Baileys' logger", () => {
  it("has pino's shape and prints nothing", () => {
    const logger = silentPinoLogger();
    expect(logger.level).toBe("silent");
    expect(logger.child({ a: 1 })).toBe(logger);
    for (const level of ["trace", "debug", "info", "warn", "error", "fatal"] as const) {
      expect(logger[level]("x")).toBeUndefined();
    }
  });
});
