import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { chat, quiet, handOver } from "./helpers/app.js";
import { FRIEND, OWNER, STRANGER, useTelegramApp } from "./helpers/telegram.js";

/**
 * What the app sends to Telegram, and how: formatting, files, who it may reach, the outbox through
 * outages and rate limits, and answers to turns no person started. What comes in is in
 * telegram.test.ts.
 */
const t = useTelegramApp();

describe("sending to Telegram", () => {
  it("splits a 10,000-character answer into messages under 4096 characters, in order, losing nothing", async () => {
    const paragraphs = Array.from(
      { length: 50 },
      (_, i) => `Paragraph ${i + 1}: ${"lorem ipsum ".repeat(16).trim()}.`,
    );
    const markdown = paragraphs.join("\n\n");
    expect(markdown.length).toBeGreaterThan(10_000);
    const from = t.telegram.sent.length;
    t.fake.enqueue(
      toolTurn("send_telegram_message", { recipient: String(OWNER), message: markdown }),
      textTurn("done"),
    );
    await chat(t.app, "send me the long text on telegram");
    const parts = t.telegram.sent.slice(from);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    for (const part of parts) expect(String(part.params.text).length).toBeLessThanOrEqual(4096);
    expect(t.shown(OWNER, from).join("\n\n")).toBe(paragraphs.join("\n\n"));
  });

  it("escapes <, & and code blocks so Telegram shows them as written", async () => {
    const from = t.telegram.sent.length;
    const markdown =
      "if a < b && c > d\n\n```html\n<script>alert('&amp;')</script>\n```\n\nInline `<b>` too.";
    t.fake.enqueue(
      toolTurn("send_telegram_message", { recipient: "Ada", message: markdown }),
      textTurn("done"),
    );
    await chat(t.app, "show me some code on telegram");
    const html = String(t.telegram.sent[from]?.params.text);
    expect(html).toContain("if a &lt; b &amp;&amp; c &gt; d");
    expect(html).toContain(
      "<pre><code class=\"language-html\">&lt;script&gt;alert('&amp;amp;')&lt;/script&gt;</code></pre>",
    );
    expect(html).toContain("<code>&lt;b&gt;</code>");
    expect(t.shown(OWNER, from)[0]).toContain("<script>alert('&amp;')</script>");
  });

  it("sends a file as a photo, a voice message or a document, and only from the file areas", async () => {
    const workspace = join(t.env.dir, "files", "workspace");
    mkdirSync(workspace, { recursive: true });
    writeFileSync(join(workspace, "chart.png"), "PNG bytes");
    writeFileSync(join(workspace, "hello.mp3"), "MP3 bytes");
    writeFileSync(join(workspace, "notes.csv"), "a,b\n1,2\n");
    const from = t.telegram.sent.length;
    t.fake.enqueue(
      toolTurn("send_telegram_message", {
        recipient: "Ada",
        attachmentPath: "chart.png",
        message: "The chart",
      }),
      toolTurn("send_telegram_message", { recipient: "Ada", attachmentPath: "hello.mp3" }),
      toolTurn("send_telegram_message", { recipient: "Ada", attachmentPath: join(workspace, "notes.csv") }),
      toolTurn("send_telegram_message", { recipient: "Ada", attachmentPath: "/etc/passwd" }),
      toolTurn("send_telegram_message", { recipient: "Ada", attachmentPath: "../main/config.toml" }),
      textTurn("done"),
    );
    const calls = t.fake.requests.length;
    await chat(t.app, "send me the files");
    const sent = t.telegram.sent.slice(from);
    expect(sent.map((s) => s.method)).toEqual(["sendPhoto", "sendVoice", "sendDocument"]);
    expect(sent[0]?.params.caption).toBe("The chart");
    expect(sent.map((s) => s.files[0]?.fileName)).toEqual(["chart.png", "hello.mp3", "notes.csv"]);
    expect(sent[2]?.files[0]?.data.toString()).toBe("a,b\n1,2\n");
    expect(t.fake.requests[calls + 4]?.lastUserText).toMatch(/outside the file areas/);
    expect(t.fake.requests[calls + 5]?.lastUserText).toMatch(/"\.\." is not allowed/);
  });

  it("sends only to the owner and the allowlist, whatever the model asks", async () => {
    const from = t.telegram.sent.length;
    t.fake.enqueue(
      toolTurn("send_telegram_message", { recipient: String(STRANGER), message: "hi" }),
      toolTurn("send_telegram_message", { recipient: "Bob", message: "hi" }),
      toolTurn("send_telegram_message", { recipient: String(FRIEND), message: "hi friend" }),
      textTurn("done"),
    );
    const calls = t.fake.requests.length;
    await chat(t.app, "message people");
    expect(t.fake.requests[calls + 1]?.lastUserText).toMatch(/3003 is not on the Telegram allowlist/);
    expect(t.fake.requests[calls + 2]?.lastUserText).toMatch(/Unknown recipient "Bob"/);
    expect(t.shown(STRANGER, from)).toEqual([]);
    expect(t.shown(FRIEND, from)).toEqual(["hi friend"]);
  });

  it("keeps a message through a Telegram outage and delivers it, once, when Telegram is back", async () => {
    const from = t.telegram.sent.length;
    t.telegram.setDown(true);
    t.fake.enqueue(
      toolTurn("send_telegram_message", { recipient: "Ada", message: "Your parcel arrived." }),
      textTurn("Sent."),
    );
    const calls = t.fake.requests.length;
    await chat(t.app, "tell me on telegram when the parcel arrives");
    expect(t.fake.requests[calls + 1]?.lastUserText).toMatch(/queued and will be sent automatically/);
    const row = await t.app.db.query<{ status: string; attempts: number }>(
      "SELECT status, attempts FROM deliveries WHERE payload->>'text' = 'Your parcel arrived.'",
    );
    expect(row.rows[0]).toMatchObject({ status: "pending" });
    t.telegram.setDown(false);
    await vi.waitFor(() => expect(t.shown(OWNER, from)).toEqual(["Your parcel arrived."]), {
      timeout: 20_000,
    });
    // Once: the outbox holds nothing more, and nothing more is sent a moment later.
    await quiet(t.app);
    await setTimeout(300);
    expect(t.shown(OWNER, from)).toEqual(["Your parcel arrived."]);
  });

  it("waits out a 429 and sends when Telegram says it may", async () => {
    const from = t.telegram.sent.length;
    t.telegram.failNext("sendMessage", { status: 429, retryAfter: 1 });
    t.fake.enqueue(
      toolTurn("send_telegram_message", { recipient: "Ada", message: "Rate limited hello" }),
      textTurn("ok"),
    );
    await chat(t.app, "say hello");
    await vi.waitFor(() => expect(t.shown(OWNER, from)).toEqual(["Rate limited hello"]), { timeout: 15_000 });
  });
});

describe("turns no person started answer the owner on Telegram", () => {
  it("an async plugin result", async () => {
    const from = t.telegram.sent.length;
    t.fake.enqueue(textTurn("Your export is ready: 120 rows."));
    const response = await handOver(t.app, {
      source: "plugin:exporter/export",
      message: 'The run of tool "export" returned: 120 rows',
    });
    expect(response.status).toBe(202);
    await vi.waitFor(() => expect(t.shown(OWNER, from)).toEqual(["Your export is ready: 120 rows."]));
    // Delivered there, so the console does not show it again.
    t.fake.enqueue(textTurn("hello"));
    expect((await chat(t.app, "hi")).body.response).toBe("hello");
  });

  it("a cron entry", async () => {
    const from = t.telegram.sent.length;
    const soon = new Date(Date.now() + 1_500).toISOString();
    t.fake.enqueue(
      toolTurn("manage_cron", { action: "create", note: "stretch your legs", fire_at: soon }),
      textTurn("Scheduled."),
    );
    await chat(t.app, "remind me to stretch");
    t.fake.enqueue(
      toolTurn("send_telegram_message", { recipient: "Ada", message: "Time to stretch your legs!" }),
      textTurn("Reminded."),
    );
    await vi.waitFor(() => expect(t.shown(OWNER, from)).toEqual(["Time to stretch your legs!"]), {
      timeout: 15_000,
    });
    await t.app.queue.idle();
    // The turn sent its own message: its final text is not sent as well.
    expect(t.shown(OWNER, from)).toEqual(["Time to stretch your legs!"]);
  });
});
