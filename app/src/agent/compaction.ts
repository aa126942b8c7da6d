import type { AgentMessage } from "@mariozechner/pi-agent-core";
import {
  completeSimple,
  type Api,
  type AssistantMessage,
  type Context,
  type Model,
  type SimpleStreamOptions,
} from "@mariozechner/pi-ai";
import { errorMessage, type Logger } from "@stavrobot/common";
import type { StoredMessage } from "../db/messages.js";
import type { ConversationStore } from "./conversation.js";
import type { ApiKeySource } from "./model.js";
import { estimateAll, estimateTokens, type TokenBudget } from "./tokens.js";

export type CompleteFn = (
  model: Model<Api>,
  context: Context,
  options?: SimpleStreamOptions,
) => Promise<AssistantMessage>;

export interface CompactionDeps {
  conversation: ConversationStore;
  model: Model<Api>;
  getApiKey: ApiKeySource;
  budget: TokenBudget;
  logger: Logger;
  complete?: CompleteFn;
  /** Asked before the summary call: a reason not to make it (a used-up budget), or undefined. */
  refuseModelCall?: () => string | undefined;
  /** Told of each summary call's answer (usage and cost). */
  onModelCall?: (message: AssistantMessage) => void;
}

export type CompactionResult =
  | { compacted: true; upToMessageId: number; summarisedMessages: number }
  | { compacted: false; reason: string };

const SUMMARY_PROMPT = `You compress the older part of a conversation between a person and their personal assistant.
Write a faithful summary the assistant can rely on later. Use these headings:
Decisions and outcomes; Pending tasks and promises; Key facts about the person and their world; Errors and what was tried; Where the conversation stands.
Keep names, numbers, dates, ids and commitments exactly. Leave out pleasantries. Write plain text.`;

const SHORT_PROMPT = `Summarise the conversation below as at most 15 short bullet points, keeping facts, decisions, open tasks, names, numbers and dates exactly.`;

/** A user message that starts a turn: the cut never separates a tool call from its result. */
export function isTurnStart(messages: readonly AgentMessage[], index: number): boolean {
  const message = messages[index];
  if (message?.role !== "user") return false;
  if (index === 0) return true;
  const previous = messages[index - 1] as AgentMessage;
  if (previous.role === "user") return true;
  return previous.role === "assistant" && !previous.content.some((block) => block.type === "toolCall");
}

/** Index of the first message to keep verbatim, or undefined when no safe cut exists. */
export function findCutIndex(messages: readonly AgentMessage[], keepTokens: number): number | undefined {
  let kept = 0;
  let candidate: number | undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    kept += estimateTokens(messages[i] as AgentMessage);
    if (kept > keepTokens) {
      candidate = i + 1;
      break;
    }
  }
  if (candidate === undefined) return undefined;
  for (let i = Math.max(candidate, 1); i < messages.length; i++) if (isTurnStart(messages, i)) return i;
  for (let i = Math.min(candidate, messages.length) - 1; i >= 1; i--) if (isTurnStart(messages, i)) return i;
  return undefined;
}

export function serializeForSummary(messages: readonly AgentMessage[]): string {
  const lines: string[] = [];
  for (const message of messages) {
    if (message.role === "user") {
      const text = typeof message.content === "string" ? message.content : textOf(message.content);
      lines.push(`User: ${text}`);
    } else if (message.role === "assistant") {
      for (const block of message.content) {
        if (block.type === "text" && block.text.trim()) lines.push(`Assistant: ${block.text}`);
        if (block.type === "toolCall") {
          lines.push(`Assistant called ${block.name}(${clip(JSON.stringify(block.arguments), 600)})`);
        }
      }
    } else if (message.role === "toolResult") {
      lines.push(
        `Tool result (${message.toolName})${message.isError ? " [error]" : ""}: ${clip(textOf(message.content), 2000)}`,
      );
    }
  }
  return lines.join("\n");
}

/**
 * Summarises the older messages once the conversation passes its budget, keeping the newest
 * ones verbatim. The summary is saved with the id of the last message it covers; history is then
 * reloaded as summary + newer messages. An empty or failed summary is never saved.
 */
export async function compactIfNeeded(deps: CompactionDeps): Promise<CompactionResult> {
  const conversation = await deps.conversation.current();
  const rows = conversation.messages;
  const messages = rows.map((row) => row.message);
  const total = estimateAll(messages) + Math.ceil((conversation.summary?.text.length ?? 0) / 3);
  if (total <= deps.budget.compactAbove) return { compacted: false, reason: "under budget" };
  const cut = findCutIndex(messages, deps.budget.keep);
  if (cut === undefined || cut === 0) return { compacted: false, reason: "no safe cut point" };
  const older = rows.slice(0, cut);
  const boundary = (older[older.length - 1] as StoredMessage).id;
  const transcript =
    (conversation.summary ? `Summary of what came before:\n${conversation.summary.text}\n\n` : "") +
    serializeForSummary(older.map((row) => row.message));
  const summary =
    (await summarise(deps, SUMMARY_PROMPT, transcript)) ?? (await summarise(deps, SHORT_PROMPT, transcript));
  if (!summary) return { compacted: false, reason: "the model returned no usable summary" };
  await deps.conversation.compact(summary, boundary);
  deps.logger.info("conversation compacted", { upToMessageId: boundary, messages: older.length });
  return { compacted: true, upToMessageId: boundary, summarisedMessages: older.length };
}

async function summarise(
  deps: CompactionDeps,
  systemPrompt: string,
  transcript: string,
): Promise<string | undefined> {
  const complete = deps.complete ?? completeSimple;
  try {
    const refusal = deps.refuseModelCall?.();
    if (refusal) {
      deps.logger.warn("compaction skipped", { reason: refusal });
      return undefined;
    }
    const apiKey = await deps.getApiKey(deps.model.provider);
    if (!apiKey) return undefined;
    const reply = await complete(
      deps.model,
      {
        systemPrompt,
        messages: [
          { role: "user", content: `<conversation>\n${transcript}\n</conversation>`, timestamp: Date.now() },
        ],
      },
      { apiKey, maxTokens: 2048 },
    );
    deps.onModelCall?.(reply);
    if (reply.stopReason === "error" || reply.stopReason === "aborted") {
      deps.logger.warn("compaction summary failed", { error: reply.errorMessage });
      return undefined;
    }
    const text = textOf(reply.content).trim();
    // A "summary" as long as what it summarises saves nothing.
    return text.length > 0 && text.length < transcript.length ? text : undefined;
  } catch (error) {
    deps.logger.warn("compaction summary failed", { error: errorMessage(error) });
    return undefined;
  }
}

function textOf(content: readonly { type: string; text?: string }[]): string {
  return content
    .map((block) => (block.type === "text" ? (block.text ?? "") : block.type === "image" ? "[image]" : ""))
    .filter((text) => text.length > 0)
    .join("\n");
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : text.slice(0, max) + "…";
}
