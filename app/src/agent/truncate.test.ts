import type { AgentMessage } from "@mariozechner/pi-agent-core";
import type { AssistantMessage, TextContent } from "@mariozechner/pi-ai";
import { describe, expect, it } from "vitest";
import { estimateAll, measureTokens } from "./tokens.js";
import { TRUNCATED_MARK, TURNS_LEFT_OUT, truncateToBudget } from "./truncate.js";

const user = (text: string): AgentMessage => ({
  role: "user",
  content: [{ type: "text", text }],
  timestamp: 0,
});

function assistant(text: string, calls: string[] = []): AssistantMessage {
  return {
    role: "assistant",
    content: [
      { type: "text", text },
      ...calls.map((id) => ({ type: "toolCall" as const, id, name: "db_search", arguments: { q: id } })),
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

const result = (id: string, text: string): AgentMessage => ({
  role: "toolResult",
  toolCallId: id,
  toolName: "db_search",
  content: [{ type: "text", text }],
  isError: false,
  timestamp: 0,
});

const textOf = (message: AgentMessage | undefined): string =>
  message && "content" in message && Array.isArray(message.content)
    ? message.content.map((block) => (block.type === "text" ? block.text : "")).join("|")
    : "";

/** Tool results whose call is not in an earlier message of the same request. */
function orphans(messages: readonly AgentMessage[]): string[] {
  const calls = new Set<string>();
  const found: string[] = [];
  for (const message of messages) {
    if (message.role === "assistant")
      for (const block of message.content) if (block.type === "toolCall") calls.add(block.id);
    if (message.role === "toolResult" && !calls.has(message.toolCallId)) found.push(message.toolCallId);
  }
  return found;
}

/** Fresh copies measured without the cache: what is sent, not what was estimated before. */
const sent = (messages: readonly AgentMessage[]): number =>
  messages.reduce((sum, message) => sum + measureTokens(message), 0);

describe("pre-send truncation", () => {
  it("sends the conversation as it is while it fits", () => {
    const messages = [user("hello"), assistant("hi"), user("again")];
    expect(truncateToBudget(messages, 1000)).toBe(messages);
  });

  it("leaves the oldest whole turns out first and says so; the summary moves to the new first message", () => {
    const summary: TextContent = { type: "text", text: "[Summary of earlier conversation]\nS" };
    const first: AgentMessage = {
      role: "user",
      content: [summary, { type: "text", text: "a".repeat(3000) }],
      timestamp: 0,
    };
    const messages = [
      first,
      assistant("b".repeat(3000)),
      user("c".repeat(900)),
      assistant("d".repeat(900)),
      user("newest"),
    ];
    const fitted = truncateToBudget(messages, 800, summary);
    expect(sent(fitted)).toBeLessThanOrEqual(800);
    // The turn that did not fit is gone whole; the newer ones are verbatim.
    expect(fitted).toHaveLength(3);
    expect(fitted[0]!.role).toBe("user");
    const front = (fitted[0] as { content: TextContent[] }).content;
    expect(front[0]).toBe(summary);
    expect(front[1]!.text).toBe(TURNS_LEFT_OUT);
    expect(front[2]!.text).toBe("c".repeat(900));
    expect(fitted[1]).toBe(messages[3]);
    expect(fitted[2]).toBe(messages[4]);
    // The conversation itself is untouched.
    expect((first as { content: TextContent[] }).content).toHaveLength(2);
  });

  it("never leaves a tool result without its call: a turn with tools goes whole or not at all", () => {
    const messages = [
      user("first request"),
      assistant("looking", ["t1"]),
      result("t1", "r".repeat(1500)),
      assistant("found it"),
      user("second request"),
      assistant("looking again", ["t2"]),
      result("t2", "short"),
    ];
    for (const limit of [100, 300, 600, 900]) {
      const fitted = truncateToBudget(messages, limit);
      expect(orphans(fitted)).toEqual([]);
      expect(fitted[0]!.role).toBe("user");
      expect(fitted.at(-1)).toBe(messages.at(-1));
    }
  });

  it("in one long turn: halves the largest older outputs, then leaves out the oldest tool rounds", () => {
    const messages: AgentMessage[] = [user("find everything about the trip")];
    for (let i = 1; i <= 30; i++) {
      messages.push(assistant(`searching ${i}`, [`t${i}`]), result(`t${i}`, `${i} `.repeat(300)));
    }
    const fitted = truncateToBudget(messages, 2000);
    expect(sent(fitted)).toBeLessThanOrEqual(2000);
    expect(orphans(fitted)).toEqual([]);
    expect(textOf(fitted[0])).toMatch(/earlier tool call\(s\) of this request .* left out/);
    expect(textOf(fitted[0])).toContain("find everything about the trip");
    // The newest round is whole.
    expect(fitted.at(-1)).toBe(messages.at(-1));
    expect(fitted.at(-2)).toBe(messages.at(-2));
    expect(fitted.some((message) => textOf(message).includes(TRUNCATED_MARK))).toBe(true);
    // Nothing shortened in place.
    expect(textOf(messages[2])).toBe("1 ".repeat(300));
  });

  it("as a last resort shortens the newest message too", () => {
    const messages = [user("a"), assistant("b"), user("x".repeat(30_000))];
    const fitted = truncateToBudget(messages, 3000);
    expect(sent(fitted)).toBeLessThanOrEqual(3000);
    expect(textOf(fitted.at(-1))).toContain(TRUNCATED_MARK);
  });

  it("fits any conversation of text within the limit and keeps calls with their results", () => {
    let seed = 7;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let run = 0; run < 200; run++) {
      const messages: AgentMessage[] = [];
      let id = 0;
      for (let turn = 0; turn < 1 + random(8); turn++) {
        messages.push(user("u".repeat(random(3000))));
        for (let round = 0; round < random(5); round++) {
          const calls = Array.from({ length: 1 + random(3) }, () => `c${++id}`);
          messages.push(assistant("a".repeat(random(500)), calls));
          for (const call of calls) messages.push(result(call, "r".repeat(random(4000))));
        }
        messages.push(assistant("done ".repeat(random(400))));
      }
      messages.push(user("newest ".repeat(random(2000))));
      const limit = 200 + random(5000);
      const fitted = truncateToBudget(messages, limit);
      expect(sent(fitted)).toBeLessThanOrEqual(limit);
      expect(orphans(fitted)).toEqual([]);
      expect(fitted[0]!.role).toBe("user");
      expect(estimateAll(messages)).toBe(sent(messages));
    }
  });
});
