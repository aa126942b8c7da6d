import { describe, expect, it } from "vitest";
import { textTurn, toolTurn, type RecordedRequest } from "@stavrobot/common/test-support";
import { chat, configFor, useTestApp } from "./helpers/app.js";

// The smallest context budget (10k tokens), so a few long turns are enough to compact.
const t = useTestApp({
  config: (fake) => configFor(fake, "anthropic", "").replace("[queue]", "contextTokensK = 10\n[queue]"),
});

const isSummaryRequest = (request: RecordedRequest) =>
  JSON.stringify(request.body.system ?? "").includes("Summarise") ||
  JSON.stringify(request.body.system ?? "").includes("compress");

describe("db_search over compacted conversation", () => {
  it("finds a message that compaction has removed from the context", async () => {
    t.fake.enqueue(textTurn("Noted."));
    await chat(t.app, "The spare key is hidden under the blue flowerpot by the shed.");
    const said = await t.app.db.query<{ id: number }>(
      "SELECT id FROM messages WHERE role = 'user' AND search_text LIKE '%flowerpot%'",
    );
    const saidId = said.rows[0]!.id;

    // Long turns until a compaction covers that message; the summary does not mention it.
    t.fake.setResponder((request) =>
      isSummaryRequest(request)
        ? textTurn("SUMMARY: the owner talked about the garden and the weather.")
        : textTurn(`Understood. ${"We keep talking about the garden. ".repeat(40)}`),
    );
    const covered = async () => {
      const rows = await t.app.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM compactions WHERE up_to_message_id >= $1",
        [saidId],
      );
      return rows.rows[0]!.n > 0;
    };
    for (let turn = 0; turn < 30 && !(await covered()); turn++) {
      expect((await chat(t.app, `garden note ${turn}: ${"tomatoes and beans ".repeat(120)}`)).status).toBe(
        200,
      );
      await t.app.queue.idle();
    }
    expect(await covered()).toBe(true);
    t.fake.setResponder(undefined);

    t.fake.enqueue(toolTurn("db_search", { query: "flowerpot" }), textTurn("Under the blue flowerpot."));
    const before = t.fake.requests.length;
    expect((await chat(t.app, "where did I say the spare key is?")).status).toBe(200);
    // The model no longer has the message in its context...
    const context = JSON.stringify(t.fake.requests[before]?.body.messages);
    expect(context).toContain("[Summary of earlier conversation]");
    expect(context).not.toContain("flowerpot by the shed");
    // ...but the search finds it.
    const found = t.fake.requests[before + 1]?.lastUserText ?? "";
    expect(found).toMatch(/^Messages \(\d+ match\(es\)\):/m);
    expect(found).toContain(`[id:${saidId}]`);
    expect(found).toMatch(new RegExp(`\\[id:${saidId}\\] \\[[^\\]]+\\] user: .*blue flowerpot by the shed`));
  });
});
