import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  startFakeAnthropic,
  textTurn,
  toolTurn,
  type FakeLlmServer,
  type RecordedRequest,
} from "@stavrobot/common/test-support";
import type { RunningApp } from "../src/app.js";
import { chat, configFor, createTestEnv, startTestApp, type TestEnv } from "./helpers/app.js";

interface Block {
  type: string;
  id?: string;
  tool_use_id?: string;
  text?: string;
}

function isSummaryRequest(request: RecordedRequest): boolean {
  return (
    JSON.stringify(request.body.system ?? "").includes("compress") ||
    JSON.stringify(request.body.system ?? "").includes("Summarise")
  );
}

/** Every tool_result in a request must answer a tool_use sent in that same request. */
function orphanedToolResults(request: RecordedRequest): string[] {
  const messages = request.body.messages as { role: string; content: string | Block[] }[];
  const uses = new Set<string>();
  const orphans: string[] = [];
  for (const message of messages) {
    if (typeof message.content === "string") continue;
    for (const block of message.content) {
      if (block.type === "tool_use" && block.id) uses.add(block.id);
      if (block.type === "tool_result" && block.tool_use_id && !uses.has(block.tool_use_id))
        orphans.push(block.tool_use_id);
    }
  }
  return orphans;
}

describe.each([
  {
    label: "a real summary",
    summary: "SUMMARY: the owner logged 40 numbered notes; all stored in table notes.",
    expectSaved: true,
  },
  { label: "an empty summary", summary: "   ", expectSaved: false },
  { label: "a thinking-only summary", summary: undefined, expectSaved: false },
])("compaction over 100+ messages with tool calls ($label)", ({ summary, expectSaved }) => {
  let fake: FakeLlmServer;
  let testEnv: TestEnv;
  let app: RunningApp;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    // The smallest budget (10k tokens) so compaction happens several times.
    testEnv = await createTestEnv(
      configFor(fake, "anthropic", "").replace("[queue]", "contextTokensK = 10\n[queue]"),
    );
    app = await startTestApp(testEnv);
    let note = 0;
    fake.setResponder((request) => {
      if (isSummaryRequest(request))
        return summary === undefined
          ? { content: [{ type: "thinking", thinking: "Working out what to keep." }] }
          : textTurn(summary);
      if (request.lastUserText.includes("Text: note")) {
        note++;
        return toolTurn(
          "execute_sql",
          // Turn sizes vary so that a cut could land anywhere inside a turn.
          {
            query: `CREATE TABLE IF NOT EXISTS notes (n int, body text); INSERT INTO notes VALUES (${note}, '${"detail ".repeat(10 + ((note * 37) % 90))}')`,
          },
          `Saving note ${note}.`,
        );
      }
      return textTurn(`Saved. ${"Confirmation text. ".repeat(1 + ((note * 13) % 40))}`);
    });
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await testEnv?.cleanup();
  });

  it("keeps tool calls paired with their results and never stores an empty summary", async () => {
    for (let i = 1; i <= 30; i++) {
      const reply = await chat(app, `note ${i}: ${"some words about the day ".repeat(8)}`);
      expect(reply.status).toBe(200);
      expect(String(reply.body.response)).toMatch(/^Saved\./);
    }
    await app.queue.idle();
    const messages = await app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM messages");
    expect(messages.rows[0]!.n).toBe(120);

    const turnRequests = fake.requests.filter((request) => !isSummaryRequest(request));
    for (const request of turnRequests) expect(orphanedToolResults(request)).toEqual([]);

    const compactions = await app.db.query<{ summary: string; up_to_message_id: number }>(
      "SELECT summary, up_to_message_id FROM compactions ORDER BY id",
    );
    const summaryRequests = fake.requests.filter(isSummaryRequest);
    expect(summaryRequests.length).toBeGreaterThan(0);
    if (!expectSaved) {
      // No summary was saved: the older messages were cut all the same, a note in its place.
      expect(compactions.rows.length).toBeGreaterThanOrEqual(1);
      for (const row of compactions.rows)
        expect(row.summary).toMatch(/^\[Older messages could not be summarised/);
      // Both the full prompt and the short fallback were tried each time the summariser was asked.
      expect(summaryRequests.length % 2).toBe(0);
      return;
    }
    expect(compactions.rows.length).toBeGreaterThanOrEqual(2);
    for (const row of compactions.rows) {
      expect(row.summary.trim()).not.toBe("");
      // The first message after each boundary starts a turn: a user message.
      const next = await app.db.query<{ role: string }>(
        "SELECT role FROM messages WHERE id > $1 ORDER BY id LIMIT 1",
        [row.up_to_message_id],
      );
      expect(next.rows[0]?.role).toBe("user");
    }
    // Later turns carry the summary instead of the old messages.
    const last = turnRequests[turnRequests.length - 1]!;
    const sent = JSON.stringify(last.body.messages);
    expect(sent).toContain("[Summary of earlier conversation]");
    expect(sent).toContain("SUMMARY: the owner logged");
    expect(sent).not.toContain("note 1: ");
    // And the transcript given to the summariser included the tool calls.
    expect(summaryRequests[0]!.lastUserText).toContain("Assistant called execute_sql(");
  }, 180_000);
});
