import { Agent, type AgentMessage, type AgentTool } from "@mariozechner/pi-agent-core";
import { Type, type Api, type Context, type Model } from "@mariozechner/pi-ai";
import type { Database } from "../db/database.js";
import { InboxStore } from "../db/inbox.js";
import { finishChange } from "../db/inbox-changes.js";
import { UsageMeter } from "../usage/meter.js";
import type { AnthropicWire } from "../model/anthropic/client.js";
import { ConversationStore } from "./conversation.js";

class Rehearsed extends Error {}

/**
 * Runs a turn's writes once, with the product's own stores, in a transaction that is rolled back:
 * the inbox inserts (both kinds), the messages with the turn's end and a usage row. The first real turn then
 * finds them planned and, on PGlite, the WebAssembly they run compiled (it compiles each function
 * the first time it runs). Nothing is kept but a gap in the id sequences. Never throws.
 */
export async function rehearseTurnWrites(db: Database, timezone: string): Promise<void> {
  try {
    await db.transaction(async (tx) => {
      const inbox = new InboxStore(tx);
      const { entry } = await inbox.add(null, null, { message: "rehearsal", attachments: [] }, undefined, {
        start: true,
      });
      // The next message's insert too, with the id the first one drew.
      await inbox.reserve(null, null, { message: "rehearsal", attachments: [] })?.saved;
      const conversation = new ConversationStore(tx);
      const now = Date.now();
      const messages: AgentMessage[] = [
        { role: "user", content: "rehearsal", timestamp: now },
        {
          role: "toolResult",
          toolCallId: "rehearsal",
          toolName: "rehearsal",
          content: [],
          isError: false,
          timestamp: now,
        },
      ];
      for (const message of messages) await conversation.save(message, entry.id, { defer: true });
      const meter = new UsageMeter(tx, {}, timezone);
      meter.record({
        kind: "turn",
        model: "rehearsal",
        inputTokens: 0,
        outputTokens: 0,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        costUsd: 0,
      });
      await meter.writeWith((usage) =>
        conversation.flush([
          finishChange(entry.id, { status: "done", response: "rehearsal", outcome: "reply", seen: true }),
          ...usage,
        ]),
      );
      throw new Rehearsed();
    });
  } catch {
    // Rolled back, as meant (or the database refused: the first turn will tell).
  }
}

export interface TurnCodeRehearsal {
  wire: AnthropicWire;
  model: Model<Api>;
  /** The conversation as the first turn will send it: the very message objects, whose encoding the wire keeps. */
  history: AgentMessage[];
  transformContext?: (messages: AgentMessage[]) => Promise<AgentMessage[]>;
}

/** The rehearsal's only tool: it answers the call the rehearsed model makes. */
const REHEARSAL_TOOL: AgentTool = {
  name: "rehearsal",
  label: "rehearsal",
  description: "Answers the rehearsal's call.",
  parameters: Type.Object({ query: Type.String() }),
  execute: async () => ({ content: [{ type: "text", text: "rows[1]{one}:\n  1" }], details: {} }),
};

/** A Messages API event stream of one answer: `block` is its only content block. */
function answer(block: Record<string, unknown>, delta: Record<string, unknown>, stopReason: string): string {
  const usage = { input_tokens: 1, output_tokens: 1 };
  const events = [
    {
      type: "message_start",
      message: { id: "msg_rehearsal", type: "message", role: "assistant", content: [], usage },
    },
    { type: "content_block_start", index: 0, content_block: block },
    { type: "content_block_delta", index: 0, delta },
    { type: "content_block_stop", index: 0 },
    { type: "message_delta", delta: { stop_reason: stopReason }, usage },
    { type: "message_stop" },
  ];
  return events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join("");
}

const ANSWERS = [
  answer(
    { type: "tool_use", id: "toolu_rehearsal", name: REHEARSAL_TOOL.name, input: {} },
    { type: "input_json_delta", partial_json: JSON.stringify({ query: "SELECT 1" }) },
    "tool_use",
  ),
  answer({ type: "text", text: "" }, { type: "text_delta", text: "done" }, "end_turn"),
];

/**
 * Runs a turn's code once, in memory: the agent loop with a rehearsal message after the real
 * history, the model's answers (a tool call, then text) read from canned event streams through the
 * assistant's own client, a tool call and its result. Nothing is sent or written. The first real
 * turn then finds its code compiled by V8 and the history's encoding kept (DECISIONLOG.md has
 * what it saves). Says whether the whole turn ran; never throws.
 */
export async function rehearseTurnCode(rehearsal: TurnCodeRehearsal): Promise<boolean> {
  try {
    let calls = 0;
    const agent = new Agent({
      initialState: {
        systemPrompt: "",
        model: rehearsal.model,
        tools: [REHEARSAL_TOOL],
        messages: [...rehearsal.history, { role: "user", content: "rehearsal", timestamp: Date.now() }],
      },
      getApiKey: () => "rehearsal",
      streamFn: (model, context: Context, options) =>
        rehearsal.wire.rehearse(
          model,
          context,
          { ...options, cacheRetention: "short" },
          ANSWERS[Math.min(calls++, 1)] as string,
        ),
      ...(rehearsal.transformContext && { transformContext: rehearsal.transformContext }),
    });
    await agent.continue();
    // The call answered, the tool run, the last answer read: the whole turn.
    const last = agent.state.messages.at(-1);
    return calls === 2 && last?.role === "assistant" && last.stopReason === "stop";
  } catch {
    // A rehearsal that fails leaves the first turn as it was.
    return false;
  }
}
