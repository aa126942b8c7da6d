/**
 * The conversations `wire-parity.test.ts` sends through both clients: histories that exercise
 * every rule of the conversion to the Messages API, the tools they offer, and the assistant
 * message an answer makes.
 */
import { Type, type AssistantMessage, type Message } from "@mariozechner/pi-ai";

const usage = {
  input: 1,
  output: 1,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 2,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};
/** Every message's timestamp. */
export const at = 1_700_000_000_000;

/** The assistant message an answer of `content` makes (a tool call in it: stopped for tool use). */
export function answer(
  content: AssistantMessage["content"],
  from: Partial<AssistantMessage> = {},
): AssistantMessage {
  return {
    role: "assistant",
    content,
    api: "anthropic-messages",
    provider: "anthropic",
    model: "claude-sonnet-4-5",
    usage,
    stopReason: content.some((block) => block.type === "toolCall") ? "toolUse" : "stop",
    timestamp: at,
    ...from,
  };
}

export const PIXEL =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/** Histories that exercise every rule of the conversion. */
export const HISTORIES: Record<string, Message[]> = {
  "plain text": [{ role: "user", content: "hello", timestamp: at }],
  "blocks, images, empty text and lone surrogates": [
    {
      role: "user",
      content: [
        { type: "text", text: "look \uD800here" },
        { type: "text", text: "   " },
        { type: "image", data: PIXEL, mimeType: "image/png" },
      ],
      timestamp: at,
    },
    answer([
      { type: "text", text: "  " },
      { type: "text", text: "a pixel \uDC00" },
    ]),
    { role: "user", content: "   ", timestamp: at },
    { role: "user", content: [{ type: "text", text: "" }], timestamp: at },
    { role: "user", content: "and now?", timestamp: at },
  ],
  "tool calls, results (merged, with images, errors) and calls never answered": [
    { role: "user", content: "run things", timestamp: at },
    answer([
      { type: "thinking", thinking: "let me", thinkingSignature: "sig-1" },
      { type: "thinking", thinking: "unsigned" },
      { type: "thinking", thinking: "  ", thinkingSignature: "sig-2" },
      { type: "thinking", thinking: "[Reasoning redacted]", thinkingSignature: "opaque", redacted: true },
      { type: "toolCall", id: "toolu_a", name: "execute_sql", arguments: { query: "SELECT 1" } },
      { type: "toolCall", id: "toolu_b", name: "run_python", arguments: { code: "print(1)" } },
      { type: "toolCall", id: "toolu_c", name: "web_fetch", arguments: { url: "https://x" } },
    ]),
    {
      role: "toolResult",
      toolCallId: "toolu_a",
      toolName: "execute_sql",
      content: [
        { type: "text", text: "rows[1]" },
        { type: "text", text: "more" },
      ],
      isError: false,
      timestamp: at,
    },
    {
      role: "toolResult",
      toolCallId: "toolu_b",
      toolName: "run_python",
      content: [{ type: "image", data: PIXEL, mimeType: "image/png" }],
      isError: true,
      timestamp: at,
    },
    answer([{ type: "text", text: "two of three" }]),
    { role: "user", content: "again", timestamp: at },
    answer([{ type: "toolCall", id: "toolu_d", name: "execute_sql", arguments: {} }]),
  ],
  "errored and aborted answers left out, their results merged around them": [
    { role: "user", content: "go", timestamp: at },
    answer([{ type: "toolCall", id: "toolu_e", name: "execute_sql", arguments: { query: "x" } }]),
    {
      role: "toolResult",
      toolCallId: "toolu_e",
      toolName: "execute_sql",
      content: [{ type: "text", text: "done" }],
      isError: false,
      timestamp: at,
    },
    answer([{ type: "text", text: "half" }], { stopReason: "error", errorMessage: "boom" }),
    answer([{ type: "toolCall", id: "toolu_f", name: "x", arguments: {} }], { stopReason: "aborted" }),
    { role: "user", content: "still there?", timestamp: at },
  ],
  "another model's answers: thinking as text, tool ids made valid": [
    { role: "user", content: "hi", timestamp: at },
    answer(
      [
        { type: "thinking", thinking: "openai reasoning", thinkingSignature: "enc" },
        { type: "thinking", thinking: "redacted", thinkingSignature: "x", redacted: true },
        { type: "text", text: "calling", textSignature: "t" },
        {
          type: "toolCall",
          id: "call_1|fc_2/with:odd.chars",
          name: "execute_sql",
          arguments: { query: "SELECT 2" },
          thoughtSignature: "ts",
        },
      ],
      { api: "openai-responses", provider: "openai", model: "gpt-5" },
    ),
    {
      role: "toolResult",
      toolCallId: "call_1|fc_2/with:odd.chars",
      toolName: "execute_sql",
      content: [{ type: "text", text: "2" }],
      isError: false,
      timestamp: at,
    },
    { role: "user", content: [{ type: "text", text: "thanks" }], timestamp: at },
  ],
};

export const TOOLS = [
  {
    name: "execute_sql",
    description: "Run SQL.",
    parameters: Type.Object({ query: Type.String({ description: "SQL." }) }),
  },
  { name: "web_fetch", description: "Fetch.", parameters: Type.Object({}) },
];
