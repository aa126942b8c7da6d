import { beforeEach, describe, expect, it, vi } from "vitest";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { chat, configFor, post, useTestApp } from "./helpers/app.js";

// A 1x1 PNG.
const PIXEL =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

const t = useTestApp({
  config: (fake) =>
    'customPrompt = "Always answer in haiku."\npublicHostname = "https://bot.example.com"\n' +
    configFor(fake),
});

const systemText = (index: number): string =>
  (t.fake.requests[index]!.body.system as { text: string }[]).map((block) => block.text).join("\n");

beforeEach(() => t.fake.reset());

describe("what the model is sent", () => {
  it("builds the system prompt from the base prompt, custom prompt, hostname and time zone", async () => {
    t.fake.enqueue(textTurn("ok"));
    await chat(t.app, "hello");
    const system = systemText(0);
    expect(system).toContain("You are Stavrobot");
    expect(system).toContain("Always answer in haiku.");
    expect(system).toContain("https://bot.example.com");
    expect(system).toContain("UTC");
    expect(system).toContain("Your memories: none yet.");
  });

  it("puts memories in full and scratchpad titles (not bodies) in the next system prompt", async () => {
    t.fake.enqueue(
      toolTurn("manage_knowledge", {
        action: "upsert",
        store: "memory",
        content: "The owner's cat is called Miso.",
      }),
      toolTurn("manage_knowledge", {
        action: "upsert",
        store: "scratchpad",
        title: "Tax notes 2026",
        body: "SECRET-BODY-TEXT",
      }),
      textTurn("Remembered."),
      textTurn("Next turn."),
    );
    expect((await chat(t.app, "remember my cat")).body.response).toBe("Remembered.");
    expect(t.fake.requests[1]!.lastUserText).toMatch(/Memory \d+ created\./);
    expect(t.fake.requests[2]!.lastUserText).toMatch(/Scratchpad \d+ created\./);
    await chat(t.app, "next");
    const system = systemText(3);
    expect(system).toContain("The owner's cat is called Miso.");
    expect(system).toMatch(/\[Scratchpad \d+\] Tax notes 2026/);
    expect(system).not.toContain("SECRET-BODY-TEXT");
  });

  it("reads a scratchpad body on demand and reports missing entries as errors", async () => {
    const row = await t.app.db.query<{ id: number }>(
      "SELECT id FROM scratchpad WHERE title = 'Tax notes 2026'",
    );
    const id = row.rows[0]!.id;
    t.fake.enqueue(
      toolTurn("manage_knowledge", { action: "read", store: "scratchpad", id }),
      toolTurn("manage_knowledge", { action: "delete", store: "memory", id: 99999 }),
      textTurn("done"),
    );
    await chat(t.app, "read it");
    expect(t.fake.requests[1]!.lastUserText).toContain("SECRET-BODY-TEXT");
    const errorResult = JSON.stringify(t.fake.requests[2]!.body.messages.at(-1));
    expect(errorResult).toContain('"is_error":true');
    expect(errorResult).toContain("memory 99999 not found");
  });

  it("marks the system prompt, last tool and last user block for Anthropic prompt caching", async () => {
    t.fake.enqueue(textTurn("cached"));
    await chat(t.app, "cache me");
    const body = t.fake.requests[0]!.body;
    expect(body.system.at(-1).cache_control).toEqual({ type: "ephemeral" });
    expect(body.tools.at(-1).cache_control).toEqual({ type: "ephemeral" });
    expect(body.messages.at(-1).content.at(-1).cache_control).toEqual({ type: "ephemeral" });
  });

  it("sends tools without per-tool eager input streaming (no beta header in its place either)", async () => {
    t.fake.enqueue(textTurn("lean"));
    await chat(t.app, "how big are you?");
    const request = t.fake.requests[0]!;
    expect(request.body.tools.length).toBeGreaterThan(3);
    for (const tool of request.body.tools) expect(tool).not.toHaveProperty("eager_input_streaming");
    expect(String(request.headers["anthropic-beta"] ?? "")).not.toContain("fine-grained-tool-streaming");
  });

  it("sends image attachments as images and keeps only a placeholder in the history", async () => {
    t.fake.enqueue(textTurn("A single pixel."), textTurn("Still no image."));
    const reply = await post(t.app.port, "/chat", {
      message: "what is this?",
      files: [{ data: PIXEL, filename: "pixel.png", mimeType: "image/png" }],
    });
    expect(reply.body.response).toBe("A single pixel.");
    const last = t.fake.requests[0]!.body.messages.at(-1).content as {
      type: string;
      source?: { data: string; media_type: string };
    }[];
    const image = last.find((block) => block.type === "image");
    expect(image?.source).toMatchObject({ data: PIXEL, media_type: "image/png" });
    expect(JSON.stringify(last)).toContain("A file was received: pixel.png (image/png");
    const stored = await t.app.db.query<{ content: unknown }>(
      "SELECT content FROM messages WHERE role = 'user' ORDER BY id DESC LIMIT 1",
    );
    expect(JSON.stringify(stored.rows[0]!.content)).not.toContain(PIXEL);
    // The next turn does not resend the image.
    await chat(t.app, "and now?");
    expect(JSON.stringify(t.fake.requests[1]!.body)).not.toContain(PIXEL);
  });
});

describe("what SQL the model ran changed", () => {
  it("reaches the next turn's history and prompt, whatever the SQL's words name", async () => {
    // The model makes a function that writes the conversation and the memories, then calls it
    // in a later turn with SQL that names neither table.
    t.fake.enqueue(
      toolTurn("execute_sql", {
        query:
          "CREATE FUNCTION tidy_up() RETURNS void LANGUAGE sql AS $$ " +
          "UPDATE messages SET content = jsonb_set(content, '{content}', '\"[tidied]\"') WHERE content->>'content' LIKE '%' || 'PRIVATE' || '-NOTE%'; " +
          "INSERT INTO memories (content) VALUES ('Tidied by a function.') $$",
      }),
      textTurn("made"),
    );
    await chat(t.app, "PRIVATE-NOTE: make the tidy-up function");
    t.fake.enqueue(toolTurn("execute_sql", { query: "SELECT tidy_up()" }), textTurn("tidied"));
    await chat(t.app, "run it");
    t.fake.enqueue(textTurn("next"));
    expect((await chat(t.app, "what now?")).body.response).toBe("next");
    const last = t.fake.requests.at(-1)!;
    expect(JSON.stringify(last.body.messages)).not.toContain("PRIVATE-NOTE");
    expect(JSON.stringify(last.body.messages)).toContain("[tidied]");
    expect(systemText(t.fake.requests.length - 1)).toContain("Tidied by a function.");
  });
});

describe("SQL that wrote nothing", () => {
  // On a server, other databases' writes meanwhile make the SQL look as if it wrote (then the
  // copies are checked, as after any write); the embedded database is the app's alone.
  it.skipIf(Boolean(process.env.TEST_DATABASE_URL))(
    "leaves the conversation's and the knowledge's copies unchecked; SQL that wrote has them checked",
    async () => {
      const query = vi.spyOn(t.app.db, "query");
      const checks = () => query.mock.calls.filter(([sql]) => String(sql).includes("string_agg")).length;
      try {
        t.fake.enqueue(
          toolTurn("execute_sql", { query: "SELECT count(*) AS n FROM messages" }),
          textTurn("counted"),
        );
        await chat(t.app, "count them");
        t.fake.enqueue(textTurn("next"));
        await chat(t.app, "and then?");
        expect(checks()).toBe(0);

        t.fake.enqueue(
          toolTurn("execute_sql", { query: "INSERT INTO memories (content) VALUES ('x')" }),
          textTurn("kept"),
        );
        await chat(t.app, "remember x");
        t.fake.enqueue(textTurn("next"));
        await chat(t.app, "and now?");
        expect(checks()).toBeGreaterThan(0);
        expect(systemText(t.fake.requests.length - 1)).toContain("\nx");
      } finally {
        query.mockRestore();
      }
    },
  );
});
