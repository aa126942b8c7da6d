import type { AssistantMessage } from "@mariozechner/pi-ai";
import { describe, expect, it } from "vitest";
import { ToolRounds } from "./tool-rounds.js";

function answer(...calls: string[]): AssistantMessage {
  return {
    role: "assistant",
    content: [
      { type: "text", text: "working" },
      ...calls.map((name, i) => ({ type: "toolCall" as const, id: `c${i}`, name, arguments: {} })),
    ],
    api: "anthropic-messages",
    provider: "anthropic",
    model: "m",
    usage: {
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: calls.length > 0 ? "toolUse" : "stop",
    timestamp: 0,
  };
}

describe("tool rounds", () => {
  it("counts answers that call tools (several calls are one round), not plain answers", () => {
    const rounds = new ToolRounds(2);
    rounds.count(answer("db_search", "execute_sql"));
    rounds.count(answer());
    expect(rounds.reached).toBe(false);
    // A tool that does not exist still makes a round: a model calling it forever is stopped too.
    rounds.count(answer("no_such_tool"));
    expect(rounds.reached).toBe(true);
  });

  it("names the tools most called in what the person is told and in the note", () => {
    const rounds = new ToolRounds(3);
    rounds.count(answer("db_search"));
    rounds.count(answer("db_search", "execute_sql"));
    rounds.count(answer("db_search"));
    expect(rounds.reply()).toContain("stopped after 3 rounds of tool calls (db_search ×3, execute_sql ×1)");
    expect(rounds.reply()).toContain("Ask me to continue");
    const note = rounds.note();
    expect(note.role).toBe("user");
    expect(JSON.stringify(note.content)).toContain("can ask to continue");
  });
});
