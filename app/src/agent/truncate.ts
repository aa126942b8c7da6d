import type { AgentMessage } from "@mariozechner/pi-agent-core";
import type { TextContent } from "@mariozechner/pi-ai";
import { estimateAll, estimateTokens, measureTokens } from "./tokens.js";

export const TRUNCATED_MARK = "\n[truncated to fit the context window]";
export const TURNS_LEFT_OUT = "[Earlier messages were left out of this request to fit the context window.]";
const roundsLeftOut = (calls: number): string =>
  `[${calls} earlier tool call(s) of this request and their results were left out to fit the context window.]`;

/** Room kept for the notes saying what was left out (a generous estimate of their tokens). */
const NOTE_TOKENS = 50;
/** Text blocks this short are not worth halving. */
const SHORTEST_CUT = 400;

/** A user message that starts a turn: a cut there never separates a tool call from its result. */
export function isTurnStart(messages: readonly AgentMessage[], index: number): boolean {
  const message = messages[index];
  if (message?.role !== "user") return false;
  if (index === 0) return true;
  const previous = messages[index - 1] as AgentMessage;
  if (previous.role === "user") return true;
  return previous.role === "assistant" && !previous.content.some((block) => block.type === "toolCall");
}

/**
 * Before each model call: fits the request's messages within `limit` tokens, for that request only
 * (the conversation is not changed). In order, until it fits:
 * 1. the oldest whole turns are left out (the turn now running always stays), cut at turn starts;
 * 2. the largest text blocks but the newest message's are halved, each with a note;
 * 3. the oldest tool rounds of the running turn are left out (a call always with its results);
 * 4. the newest message's largest text blocks are halved too.
 * `lead` (the summary of compacted messages, at the front of the first message) is never cut and
 * moves to whichever message comes first. Only images can keep a request over the limit.
 */
export function truncateToBudget(
  messages: readonly AgentMessage[],
  limit: number,
  lead?: TextContent,
): AgentMessage[] {
  if (estimateAll(messages) <= limit) return messages as AgentMessage[];
  const first = messages[0];
  const hasLead =
    lead !== undefined && first?.role === "user" && Array.isArray(first.content) && first.content[0] === lead;
  const room = limit - NOTE_TOKENS - (hasLead ? Math.ceil(lead.text.length / 3) : 0);
  const rest: AgentMessage[] =
    hasLead && first?.role === "user" && Array.isArray(first.content)
      ? [{ ...first, content: first.content.slice(1) }, ...messages.slice(1)]
      : messages.slice();

  const start = oldestTurnThatFits(rest, room);
  const kept = new Working(rest.slice(start));
  kept.halveLargest(room, false);
  const calls = kept.total > room ? kept.dropOldestRounds(room) : 0;
  kept.halveLargest(room, true);

  const notes: TextContent[] = [];
  if (start > 0) notes.push({ type: "text", text: TURNS_LEFT_OUT });
  if (calls > 0) notes.push({ type: "text", text: roundsLeftOut(calls) });
  return withFront(kept.messages, [...(hasLead ? [lead] : []), ...notes]);
}

/** The earliest turn start from which the rest fits; the last turn start when none does. */
function oldestTurnThatFits(messages: readonly AgentMessage[], room: number): number {
  let total = estimateAll(messages);
  if (total <= room) return 0;
  let last = 0;
  for (let i = 1; i < messages.length; i++) {
    total -= estimateTokens(messages[i - 1] as AgentMessage);
    if (!isTurnStart(messages, i)) continue;
    last = i;
    if (total <= room) return i;
  }
  return last;
}

/** Blocks of the front message preceded by `blocks` (a user message made for them if needed). */
function withFront(messages: AgentMessage[], blocks: TextContent[]): AgentMessage[] {
  if (blocks.length === 0) return messages;
  const first = messages[0];
  if (first?.role === "user") {
    const content =
      typeof first.content === "string" ? [{ type: "text" as const, text: first.content }] : first.content;
    return [{ ...first, content: [...blocks, ...content] }, ...messages.slice(1)];
  }
  return [{ role: "user", content: blocks, timestamp: first?.timestamp ?? Date.now() }, ...messages];
}

/** The messages being fitted, copied (never the originals) only where a block is shortened. */
class Working {
  readonly messages: AgentMessage[];
  private readonly sizes: number[];
  private readonly copied = new Set<AgentMessage>();
  total: number;

  constructor(messages: AgentMessage[]) {
    this.messages = messages;
    // Complete messages are measured once (cached); shortened copies afresh (`remeasure`).
    this.sizes = messages.map(estimateTokens);
    this.total = this.sizes.reduce((sum, size) => sum + size, 0);
  }

  /** Halves the largest text block (of the older messages, or of the newest) until the total fits. */
  halveLargest(room: number, newest: boolean): void {
    const last = this.messages.length - 1;
    const from = newest ? last : 0;
    const to = newest ? last : last - 1;
    while (this.total > room) {
      let best: { index: number; block: number; length: number } | undefined;
      for (let i = from; i <= to; i++) {
        const content = (this.messages[i] as { content?: unknown }).content;
        if (typeof content === "string") {
          if (content.length > SHORTEST_CUT && (!best || content.length > best.length))
            best = { index: i, block: 0, length: content.length };
          continue;
        }
        if (!Array.isArray(content)) continue;
        for (const [b, block] of (content as { type: string; text?: string }[]).entries()) {
          const length = block.type === "text" ? (block.text?.length ?? 0) : 0;
          if (length > SHORTEST_CUT && (!best || length > best.length)) best = { index: i, block: b, length };
        }
      }
      if (!best) return;
      const message = this.ownCopy(best.index);
      const block = (message as { content: TextContent[] }).content[best.block] as TextContent;
      block.text = block.text.slice(0, Math.floor(block.text.length / 2)) + TRUNCATED_MARK;
      this.remeasure(best.index);
    }
  }

  /**
   * Leaves out the oldest tool rounds (an assistant message with tool calls and the results after
   * it), never the one holding the newest message. Returns how many tool calls were left out.
   */
  dropOldestRounds(room: number): number {
    let calls = 0;
    for (let i = 0; i < this.messages.length && this.total > room;) {
      const message = this.messages[i] as AgentMessage;
      const callsHere =
        message.role === "assistant"
          ? message.content.filter((block) => block.type === "toolCall").length
          : 0;
      if (callsHere === 0) {
        i++;
        continue;
      }
      let end = i + 1;
      while (this.messages[end]?.role === "toolResult") end++;
      if (end >= this.messages.length) break;
      const removed = this.sizes.splice(i, end - i).reduce((sum, size) => sum + size, 0);
      this.messages.splice(i, end - i);
      this.total -= removed;
      calls += callsHere;
    }
    return calls;
  }

  private ownCopy(index: number): AgentMessage {
    const message = this.messages[index] as AgentMessage;
    if (this.copied.has(message)) return message;
    const content = (message as { content: string | { type: string }[] }).content;
    const copy = {
      ...message,
      content:
        typeof content === "string"
          ? [{ type: "text", text: content }]
          : content.map((block) => ({ ...block })),
    } as AgentMessage;
    this.copied.add(copy);
    this.messages[index] = copy;
    return copy;
  }

  private remeasure(index: number): void {
    const size = measureTokens(this.messages[index] as AgentMessage);
    this.total += size - (this.sizes[index] as number);
    this.sizes[index] = size;
  }
}
