import type { AgentMessage } from "@mariozechner/pi-agent-core";
import { describe, expect, it } from "vitest";
import { estimateAll, estimateTokens, truncateToBudget } from "./tokens.js";

const user = (text: string): AgentMessage => ({ role: "user", content: text, timestamp: 0 });
const userBlocks = (text: string): AgentMessage => ({
  role: "user",
  content: [{ type: "text", text }],
  timestamp: 0,
});

describe("token estimates", () => {
  it("counts 3 characters a token and gives the same answer for a message measured again", () => {
    const message = user("x".repeat(300));
    expect(estimateTokens(message)).toBe(100);
    expect(estimateTokens(message)).toBe(100);
    expect(estimateAll([message, userBlocks("y".repeat(30))])).toBe(110);
  });

  it("shortens the largest old blocks until the request fits, never the newest, never the originals", () => {
    const old = userBlocks("a".repeat(6000));
    const middle = user("b".repeat(3000));
    const newest = user("c".repeat(3000));
    const messages = [old, middle, newest];
    // Measured before: the cached estimates must not hide the shortened copies.
    expect(estimateAll(messages)).toBe(4000);
    const trimmed = truncateToBudget(messages, 2500);
    expect(estimateAll(trimmed)).toBeLessThanOrEqual(2500);
    expect(trimmed[2]).toMatchObject({ content: [{ type: "text", text: "c".repeat(3000) }] });
    const text = (message: AgentMessage) =>
      "content" in message && Array.isArray(message.content) && message.content[0]?.type === "text"
        ? message.content[0].text
        : "";
    expect(text(trimmed[0]!)).toContain("[truncated to fit the context window]");
    expect(text(trimmed[0]!).length).toBeLessThan(6000);
    // The conversation itself is untouched.
    expect(text(old)).toBe("a".repeat(6000));
    expect(middle.content).toBe("b".repeat(3000));
    expect(estimateAll(messages)).toBe(4000);
  });
});
