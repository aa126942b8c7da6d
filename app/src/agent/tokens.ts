import type { AgentMessage } from "@mariozechner/pi-agent-core";
import type { Tool } from "@mariozechner/pi-ai";

/**
 * Estimates by message object. Messages are never changed once complete, and the conversation
 * keeps the same objects between turns, so each is measured once instead of on every request.
 */
const estimates = new WeakMap<AgentMessage, number>();

/** A deliberately cautious estimate (3 characters per token; 1000 per image). */
export function estimateTokens(message: AgentMessage): number {
  let estimate = estimates.get(message);
  if (estimate === undefined) {
    estimate = measureTokens(message);
    estimates.set(message, estimate);
  }
  return estimate;
}

/** Measures without the cache: for copies that are changed after they are made. */
export function measureTokens(message: AgentMessage): number {
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

/**
 * What a request costs besides its messages: the system prompt and the tool definitions, by the
 * same estimate. Measured once per tool list (the app keeps the same list between turns).
 */
export function requestOverhead(systemPrompt: string, tools: readonly Tool[]): number {
  let toolsChars = toolDefinitionChars.get(tools);
  if (toolsChars === undefined) {
    toolsChars = JSON.stringify(
      tools.map(({ name, description, parameters }) => ({ name, description, parameters })),
    ).length;
    toolDefinitionChars.set(tools, toolsChars);
  }
  return Math.ceil((systemPrompt.length + toolsChars) / 3);
}

const toolDefinitionChars = new WeakMap<readonly Tool[], number>();

export interface TokenBudget {
  /** The context the conversation may use: contextTokensK, capped by the model's window. */
  effective: number;
  /** Above this, older messages are summarised after a turn. */
  compactAbove: number;
  /** How much recent conversation a compaction keeps verbatim. */
  keep: number;
  /** Above this, a request (system prompt, tool definitions, messages) is trimmed before it is sent. */
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
