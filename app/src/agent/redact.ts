import type { AgentMessage } from "@mariozechner/pi-agent-core";
import type { ToolResultMessage } from "@mariozechner/pi-ai";

import { REDACTED, type ArgumentRedactor } from "../tools/result.js";

export type { ArgumentRedactor };

/** Secrets shorter than this are not searched for in results: they would match ordinary text. */
const MIN_SCRUBBED_LENGTH = 4;

/**
 * The stored copy of an assistant message, with the arguments of some tools' calls redacted, and
 * the secrets found per tool call id. The running turn keeps the original; every later turn and
 * every compaction sees the stored one.
 */
export function redactToolCalls(
  message: AgentMessage,
  redactors: Record<string, ArgumentRedactor>,
): { message: AgentMessage; secrets: Map<string, string[]> } {
  const secrets = new Map<string, string[]>();
  if (message.role !== "assistant") return { message, secrets };
  if (!message.content.some((block) => block.type === "toolCall" && redactors[block.name])) {
    return { message, secrets };
  }
  const content = message.content.map((block) => {
    const redact = block.type === "toolCall" ? redactors[block.name] : undefined;
    if (!redact || block.type !== "toolCall") return block;
    const redacted = redact(block.arguments);
    if (redacted.secrets.length > 0) secrets.set(block.id, redacted.secrets);
    return { ...block, arguments: redacted.args };
  });
  return { message: { ...message, content }, secrets };
}

/** The result of a call whose arguments held secrets, with every occurrence of them replaced. */
export function scrubToolResult(message: ToolResultMessage, secrets: readonly string[]): ToolResultMessage {
  const needles = secrets
    .filter((secret) => secret.length >= MIN_SCRUBBED_LENGTH)
    // The quoted form too: "Received arguments" shows the JSON of the call.
    .flatMap((secret) => [secret, JSON.stringify(secret).slice(1, -1)])
    .sort((a, b) => b.length - a.length);
  if (needles.length === 0) return message;
  const scrub = (text: string) => needles.reduce((out, needle) => out.split(needle).join(REDACTED), text);
  return {
    ...message,
    content: message.content.map((block) =>
      block.type === "text" ? { ...block, text: scrub(block.text) } : block,
    ),
  };
}
