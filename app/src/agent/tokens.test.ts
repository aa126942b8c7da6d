import type { AgentMessage } from "@mariozechner/pi-agent-core";
import { describe, expect, it } from "vitest";
import { estimateAll, estimateTokens, requestOverhead } from "./tokens.js";

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

  it("counts the system prompt and the tool definitions a request carries besides its messages", () => {
    const tools = [{ name: "t", description: "d".repeat(100), parameters: { type: "object" } }] as never;
    const overhead = requestOverhead("s".repeat(300), tools);
    expect(overhead).toBeGreaterThan(100 + 33);
    expect(overhead).toBeLessThan(100 + 60);
  });
});
