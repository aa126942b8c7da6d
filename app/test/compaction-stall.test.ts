import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  startFakeAnthropic,
  startFakeOpenAI,
  textTurn,
  toolTurn,
  type FakeLlmServer,
  type FakeTurn,
  type RecordedRequest,
} from "@stavrobot/common/test-support";
import type { RunningApp } from "../src/app.js";
import { chat, configFor, createTestEnv, startTestApp, type LlmKind, type TestEnv } from "./helpers/app.js";

/** The smallest budget the config allows: 10k tokens, estimated at 3 characters each. */
const BUDGET_TOKENS = 10_000;
const TURNS = 80;

interface Block {
  type: string;
  id?: string;
  tool_use_id?: string;
}

interface Message {
  role: string;
  content?: string | Block[] | null;
  tool_calls?: { id: string }[];
  tool_call_id?: string;
}

function isSummaryRequest(request: RecordedRequest): boolean {
  return request.lastUserText.startsWith("<conversation>");
}

/** What the budget counts of a request: its system prompt, tool definitions and messages. */
function requestChars(request: RecordedRequest): number {
  // Anthropic sends the system prompt apart; OpenAI-compatible servers get it as a message.
  const body = request.body as { system?: unknown; tools?: unknown; messages: unknown };
  return JSON.stringify([body.system ?? "", body.tools ?? [], body.messages]).length;
}

/** Tool results (either protocol) whose call was not sent earlier in the same request. */
function orphanedToolResults(request: RecordedRequest): string[] {
  const messages = request.body.messages as Message[];
  const uses = new Set<string>();
  const orphans: string[] = [];
  for (const message of messages) {
    for (const call of message.tool_calls ?? []) uses.add(call.id);
    if (message.role === "tool" && message.tool_call_id && !uses.has(message.tool_call_id))
      orphans.push(message.tool_call_id);
    if (typeof message.content === "string" || !message.content) continue;
    for (const block of message.content) {
      if (block.type === "tool_use" && block.id) uses.add(block.id);
      if (block.type === "tool_result" && block.tool_use_id && !uses.has(block.tool_use_id))
        orphans.push(block.tool_use_id);
    }
  }
  return orphans;
}

/** A summariser that thinks and says nothing: what reasoning models answered in the field. */
const THINKING_ONLY: FakeTurn = {
  content: [{ type: "thinking", thinking: "Let me work out what matters in this conversation first." }],
};

describe.each<LlmKind>(["anthropic", "openai"])(
  "compaction when the summariser answers only thinking (%s)",
  (kind) => {
    let fake: FakeLlmServer;
    let testEnv: TestEnv;
    let app: RunningApp;
    /** For each chat, how many summary requests had been made before it was sent. */
    const summariesBefore: number[] = [];

    beforeAll(async () => {
      fake = kind === "anthropic" ? await startFakeAnthropic() : await startFakeOpenAI();
      // Reasoning is on for turns: the summary request must still go without it.
      testEnv = await createTestEnv(
        configFor(fake, kind, "").replace("[queue]", 'contextTokensK = 10\nthinkingLevel = "high"\n[queue]'),
      );
      app = await startTestApp(testEnv);
      let note = 0;
      fake.setResponder((request) => {
        if (isSummaryRequest(request)) return THINKING_ONLY;
        if (request.lastUserText.includes("Text: note")) {
          note++;
          return toolTurn(
            "execute_sql",
            {
              query: `CREATE TABLE IF NOT EXISTS notes (n int, body text); INSERT INTO notes VALUES (${note}, '${"detail ".repeat(10 + ((note * 37) % 90))}')`,
            },
            `Saving note ${note}.`,
          );
        }
        return textTurn(`Saved. ${"Confirmation text. ".repeat(1 + ((note * 13) % 40))}`);
      });
      for (let i = 1; i <= TURNS; i++) {
        summariesBefore.push(fake.requests.filter(isSummaryRequest).length);
        const reply = await chat(app, `note ${i}: ${"some words about the day ".repeat(8)}`);
        expect(reply.status).toBe(200);
        expect(String(reply.body.response)).toMatch(/^Saved\./);
      }
      await app.queue.idle();
    }, 300_000);

    afterAll(async () => {
      await app?.close();
      await fake?.close();
      await testEnv?.cleanup();
    });

    it("asks for the summary without reasoning, although turns reason", () => {
      const summaries = fake.requests.filter(isSummaryRequest);
      expect(summaries.length).toBeGreaterThan(0);
      for (const request of summaries) {
        expect(request.body.thinking ?? { type: "disabled" }).toEqual({ type: "disabled" });
        expect(request.body.output_config).toBeUndefined();
        expect(request.body.reasoning_effort).toBeUndefined();
      }
      // The Anthropic model reasons in turns (the custom OpenAI-compatible one cannot).
      const turn = fake.requests.find((request) => !isSummaryRequest(request))!;
      if (kind === "anthropic") expect(turn.body.thinking?.type).toBe("enabled");
    });

    it("keeps every request of every turn within the context budget, tool calls paired", () => {
      const turns = fake.requests.filter((request) => !isSummaryRequest(request));
      expect(turns.length).toBe(TURNS * 2);
      const largest = Math.max(...turns.map(requestChars));
      expect(largest).toBeLessThanOrEqual(BUDGET_TOKENS * 3);
      for (const request of turns) expect(orphanedToolResults(request)).toEqual([]);
      // The oldest notes have left the context; the newest are there verbatim.
      const last = JSON.stringify(turns[turns.length - 1]!.body.messages);
      expect(last).not.toContain("note 1: ");
      expect(last).toContain(`note ${TURNS}: `);
    });

    it("falls through to truncation: the conversation is cut at a turn start, no summary is invented", async () => {
      const rows = await app.db.query<{ summary: string; up_to_message_id: number }>(
        "SELECT summary, up_to_message_id FROM compactions ORDER BY id",
      );
      expect(rows.rows.length).toBeGreaterThan(0);
      for (const row of rows.rows) {
        expect(row.summary).toMatch(/could not be summarised/);
        const next = await app.db.query<{ role: string }>(
          "SELECT role FROM messages WHERE id > $1 ORDER BY id LIMIT 1",
          [row.up_to_message_id],
        );
        expect(next.rows[0]?.role).toBe("user");
      }
      // Nothing is lost: every message is still in the database (db_search finds them).
      const messages = await app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM messages");
      expect(messages.rows[0]!.n).toBe(TURNS * 4);
    });

    it("backs off: after a failed summary, the next compactions truncate without asking the summariser", async () => {
      const summaries = fake.requests.filter(isSummaryRequest).length;
      // A failure used to cost two whole-transcript calls on every turn past the threshold.
      expect(summaries).toBeLessThan(TURNS / 4);
      // Each time it is asked: the full prompt, then the short one.
      const asked = summaries / 2;
      const compactions = await app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM compactions");
      expect(asked).toBeGreaterThanOrEqual(2);
      // Asked after 1, then 2, then 4 compactions without it: at most every other compaction asked.
      expect(asked * 2).toBeLessThanOrEqual(compactions.rows[0]!.n);
      // No summary request on the turn right after a failed one.
      for (let i = 1; i < summariesBefore.length - 1; i++) {
        if (summariesBefore[i]! > summariesBefore[i - 1]!)
          expect(summariesBefore[i + 1]).toBe(summariesBefore[i]);
      }
    });
  },
);
