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
import type { ApiKeySource } from "../model/model.js";

export type CompleteFn = (
  model: Model<Api>,
  context: Context,
  options?: SimpleStreamOptions,
) => Promise<AssistantMessage>;

export interface SummariserDeps {
  model: Model<Api>;
  getApiKey: ApiKeySource;
  logger: Logger;
  complete?: CompleteFn;
  /** Asked before the summary call: a reason not to make it (a used-up budget), or undefined. */
  refuseModelCall?: () => string | undefined;
  /** Told of each summary call's answer (usage and cost). */
  onModelCall?: (message: AssistantMessage) => void;
}

/**
 * A summary, or why there is none: `failed` when the summariser was asked and gave nothing usable
 * (an error, an empty or thinking-only answer, or one as long as what it summarises), `skipped`
 * when it was not asked (no key, a used-up budget).
 */
export type SummaryOutcome = { summary: string } | { failed: string } | { skipped: string };

export const SUMMARY_PROMPT = `You compress the older part of a conversation between a person and their personal assistant.
Write a faithful summary the assistant can rely on later. Use these headings:
Decisions and outcomes; Pending tasks and promises; Key facts about the person and their world; Errors and what was tried; Where the conversation stands.
Keep names, numbers, dates, ids and commitments exactly. Leave out pleasantries. Write plain text.`;

export const SHORT_PROMPT = `Summarise the conversation below as at most 15 short bullet points, keeping facts, decisions, open tasks, names, numbers and dates exactly.`;

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
 * One summary call. It never asks for reasoning, whatever the turns use: a reasoning model spent
 * its tokens thinking and answered nothing usable. Only the answer's text counts (thinking is not
 * a summary). Errors come back as values.
 */
export async function summarise(
  deps: SummariserDeps,
  systemPrompt: string,
  transcript: string,
): Promise<SummaryOutcome> {
  const complete = deps.complete ?? completeSimple;
  try {
    const refusal = deps.refuseModelCall?.();
    if (refusal) return { skipped: refusal };
    const apiKey = await deps.getApiKey(deps.model.provider);
    if (!apiKey) return { skipped: "no API key" };
    const reply = await complete(
      deps.model,
      {
        systemPrompt,
        messages: [
          { role: "user", content: `<conversation>\n${transcript}\n</conversation>`, timestamp: Date.now() },
        ],
      },
      // No `reasoning`: the call goes with thinking off.
      { apiKey, maxTokens: 2048 },
    );
    deps.onModelCall?.(reply);
    if (reply.stopReason === "error" || reply.stopReason === "aborted")
      return { failed: reply.errorMessage ?? `the summary call ended with ${reply.stopReason}` };
    const text = textOf(reply.content).trim();
    if (text.length === 0)
      return {
        failed: reply.content.some((block) => block.type === "thinking")
          ? "the answer held only thinking"
          : "the answer was empty",
      };
    // A "summary" as long as what it summarises saves nothing.
    if (text.length >= transcript.length) return { failed: "the answer was as long as the conversation" };
    return { summary: text };
  } catch (error) {
    return { failed: errorMessage(error) };
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
