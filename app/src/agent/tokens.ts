import type { AgentMessage } from "@mariozechner/pi-agent-core";

/**
 * Estimates by message object. Messages are never changed once complete, and the conversation
 * keeps the same objects between turns, so each is measured once instead of on every request.
 */
const estimates = new WeakMap<AgentMessage, number>();

/** A deliberately cautious estimate (3 characters per token; 1000 per image). */
export function estimateTokens(message: AgentMessage): number {
  let estimate = estimates.get(message);
  if (estimate === undefined) {
    estimate = measure(message);
    estimates.set(message, estimate);
  }
  return estimate;
}

function measure(message: AgentMessage): number {
  if (!("content" in message)) return 0;
  const content = message.content;
  if (typeof content === "string") return Math.ceil(content.length / 3);
  let chars = 0;
  let images = 0;
  for (const block of content) {
    if (block.type === "text") chars += block.text.length;
    else if (block.type === "thinking") chars += block.thinking.length;
    else if (block.type === "toolCall") chars += JSON.stringify(block.arguments).length + block.name.length;
    else if (block.type === "image") images++;
  }
  return Math.ceil(chars / 3) + images * 1000;
}

export function estimateAll(messages: readonly AgentMessage[]): number {
  return messages.reduce((sum, message) => sum + estimateTokens(message), 0);
}

export interface TokenBudget {
  /** The context the conversation may use: contextTokensK, capped by the model's window. */
  effective: number;
  /** Above this, older messages are summarised after a turn. */
  compactAbove: number;
  /** How much recent conversation a compaction keeps verbatim. */
  keep: number;
  /** Above this, a request is trimmed before it is sent. */
  truncateAbove: number;
}

export function tokenBudget(contextTokensK: number, modelContextWindow: number): TokenBudget {
  const effective = Math.max(10_000, Math.min(contextTokensK * 1000, modelContextWindow));
  const compactAbove = Math.floor(effective * 0.6);
  return {
    effective,
    compactAbove,
    keep: Math.floor(compactAbove * 0.5),
    truncateAbove: Math.floor(effective * 0.8),
  };
}

/**
 * Before each LLM call: when the context is over budget, shorten the largest text blocks
 * (oldest tool output first in practice) so the request still fits. Originals are not changed.
 */
export function truncateToBudget(messages: AgentMessage[], limit: number): AgentMessage[] {
  let total = estimateAll(messages);
  if (total <= limit) return messages;
  // Copies with every content as blocks (a plain-string user message becomes one text block).
  const copy = messages.map((message) =>
    "content" in message
      ? ({
          ...message,
          content:
            typeof message.content === "string"
              ? [{ type: "text", text: message.content }]
              : message.content.map((block) => ({ ...block })),
        } as AgentMessage)
      : message,
  );
  // Never shorten the newest message: it is what the model must answer.
  for (let guard = 0; guard < 200 && total > limit; guard++) {
    let best: { text: string; set: (text: string) => void } | undefined;
    for (const message of copy.slice(0, -1)) {
      if (!("content" in message) || !Array.isArray(message.content)) continue;
      for (const block of message.content) {
        if (
          block.type === "text" &&
          block.text.length > 400 &&
          (!best || block.text.length > best.text.length)
        ) {
          best = { text: block.text, set: (text) => (block.text = text) };
        }
      }
    }
    if (!best) break;
    const kept = best.text.slice(0, Math.floor(best.text.length / 2));
    best.set(kept + "\n[truncated to fit the context window]");
    // The copies change here: measured afresh, never from the cache.
    total = copy.reduce((sum, message) => sum + measure(message), 0);
  }
  return copy;
}
