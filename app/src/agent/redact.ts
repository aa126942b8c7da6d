import type { AgentMessage } from "@mariozechner/pi-agent-core";

/** Rewrites one tool's call arguments before the call is stored (e.g. to hide secrets). */
export type ArgumentRedactor = (args: Record<string, unknown>) => Record<string, unknown>;

/**
 * The stored copy of an assistant message, with the arguments of some tools' calls redacted.
 * The running turn keeps the original; every later turn and every compaction sees the stored one.
 */
export function redactToolCalls(
  message: AgentMessage,
  redactors: Record<string, ArgumentRedactor>,
): AgentMessage {
  if (message.role !== "assistant") return message;
  if (!message.content.some((block) => block.type === "toolCall" && redactors[block.name])) return message;
  return {
    ...message,
    content: message.content.map((block) => {
      const redact = block.type === "toolCall" ? redactors[block.name] : undefined;
      return redact && block.type === "toolCall" ? { ...block, arguments: redact(block.arguments) } : block;
    }),
  };
}
