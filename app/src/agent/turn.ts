import { Agent, type AgentMessage, type StreamFn, type ThinkingLevel } from "@mariozechner/pi-agent-core";
import { streamSimple, type Api, type Model, type UserMessage } from "@mariozechner/pi-ai";
import { errorMessage, type Logger } from "@stavrobot/common";
import type { Database } from "../db/database.js";
import { loadConversation, saveMessage } from "../db/messages.js";
import type { AnyAgentTool } from "../tools/result.js";
import type { ApiKeySource } from "./model.js";
import { redactToolCalls, type ArgumentRedactor } from "./redact.js";
import { truncateToBudget, type TokenBudget } from "./tokens.js";

export interface TurnDeps {
  db: Database;
  model: Model<Api>;
  thinkingLevel: ThinkingLevel;
  maxTokens: number | undefined;
  tools: () => AnyAgentTool[];
  systemPrompt: () => Promise<string>;
  getApiKey: ApiKeySource;
  budget: TokenBudget;
  logger: Logger;
  /** What to tell the sender when no provider key is configured. */
  missingKeyMessage: string;
  /** Per tool name: how its call arguments are redacted before they are stored. */
  redactors?: Record<string, ArgumentRedactor>;
}

export type TurnOutcome =
  | { kind: "reply"; text: string }
  | { kind: "aborted" }
  | { kind: "error"; message: string; retryable: boolean; progressSaved: boolean };

interface PendingSteer {
  inboxId: number;
  message: UserMessage;
}

/**
 * Runs one turn: the history from the database plus the new user message, through a fresh
 * pi-agent-core Agent, saving every message as it completes. Errors come back as values.
 */
export class TurnRunner {
  private agent: Agent | undefined;
  private steers: PendingSteer[] = [];

  constructor(private readonly deps: TurnDeps) {}

  get busy(): boolean {
    return this.agent !== undefined;
  }

  /** Injects an owner's message into the running turn. False when no turn is running. */
  steer(inboxId: number, message: UserMessage): boolean {
    if (!this.agent) return false;
    this.steers.push({ inboxId, message });
    this.agent.steer(message);
    return true;
  }

  abort(): boolean {
    if (!this.agent) return false;
    this.agent.abort();
    return true;
  }

  async run(inboxId: number, userMessage: UserMessage): Promise<TurnOutcome> {
    const { deps } = this;
    const apiKey = await deps.getApiKey(deps.model.provider);
    if (!apiKey)
      return { kind: "error", message: deps.missingKeyMessage, retryable: false, progressSaved: false };

    const messages = await this.history(inboxId, userMessage);
    const maxTokens = deps.maxTokens;
    const streamFn: StreamFn = (model, context, options) =>
      streamSimple(model, context, {
        ...options,
        ...(maxTokens ? { maxTokens } : {}),
        cacheRetention: "short",
      });
    const agent = new Agent({
      initialState: {
        systemPrompt: await deps.systemPrompt(),
        model: deps.model,
        thinkingLevel: deps.thinkingLevel,
        tools: deps.tools(),
        messages,
      },
      getApiKey: (provider) => deps.getApiKey(provider),
      streamFn,
      transformContext: async (context) => truncateToBudget(context, deps.budget.truncateAbove),
    });

    let progressSaved = false;
    let saveFailure: unknown;
    const unsubscribe = agent.subscribe(async (event) => {
      if (event.type !== "message_end" || saveFailure) return;
      const message = event.message;
      try {
        if (message.role === "user") {
          const steer = this.claimSteer(message);
          if (steer) await saveMessage(deps.db, message, steer.inboxId);
        } else if (message.role === "assistant") {
          if (message.stopReason === "error" || message.stopReason === "aborted") return;
          await saveMessage(deps.db, redactToolCalls(message, deps.redactors ?? {}), inboxId);
          progressSaved = true;
        } else if (message.role === "toolResult") {
          await saveMessage(deps.db, message, inboxId);
          progressSaved = true;
        }
      } catch (error) {
        saveFailure = error;
        agent.abort();
      }
    });

    this.agent = agent;
    try {
      await agent.continue();
    } catch (error) {
      return { kind: "error", message: errorMessage(error), retryable: !progressSaved, progressSaved };
    } finally {
      unsubscribe();
      this.agent = undefined;
      this.steers = [];
    }

    if (saveFailure) {
      deps.logger.error("saving a message failed", { error: saveFailure });
      return {
        kind: "error",
        message: `could not save the conversation: ${errorMessage(saveFailure)}`,
        retryable: false,
        progressSaved,
      };
    }
    const last = agent.state.messages[agent.state.messages.length - 1];
    if (last?.role !== "assistant")
      return {
        kind: "error",
        message: "the agent stopped without answering",
        retryable: !progressSaved,
        progressSaved,
      };
    if (last.stopReason === "aborted") return { kind: "aborted" };
    if (last.stopReason === "error") {
      const message = last.errorMessage ?? "unknown provider error";
      return {
        kind: "error",
        message,
        retryable: !progressSaved && isRetryableProviderError(message),
        progressSaved,
      };
    }
    const text = last.content
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("\n")
      .trim();
    return { kind: "reply", text };
  }

  /** History as the model should see it, with this turn's user message last (saved first). */
  private async history(inboxId: number, userMessage: UserMessage): Promise<AgentMessage[]> {
    const conversation = await loadConversation(this.deps.db);
    const messages: AgentMessage[] = [];
    let found = false;
    for (const row of conversation.messages) {
      // On a retry the saved copy lacks image data: use the full message built for this turn.
      if (!found && row.inboxId === inboxId && row.message.role === "user") {
        messages.push(userMessage);
        found = true;
      } else if (row.inboxId !== inboxId || row.message.role === "user") {
        messages.push(row.message);
      }
    }
    if (!found) {
      await saveMessage(this.deps.db, userMessage, inboxId);
      messages.push(userMessage);
    }
    if (conversation.summary) prependSummary(messages, conversation.summary.text);
    return messages;
  }

  private claimSteer(message: AgentMessage): PendingSteer | undefined {
    const index = this.steers.findIndex(
      (steer) => steer.message === message || steer.message.timestamp === (message as UserMessage).timestamp,
    );
    if (index === -1) return undefined;
    return this.steers.splice(index, 1)[0];
  }
}

/** Provider errors worth retrying: not a 4xx (bad request, auth), except rate limits and timeouts. */
export function isRetryableProviderError(message: string): boolean {
  if (/no api key/i.test(message)) return false;
  const status = /^(\d{3})\b/.exec(message.trim())?.[1];
  if (status && status.startsWith("4")) return status === "429" || status === "408";
  return !/\b(401|403)\b.*(auth|key|permission)/i.test(message);
}

/** The summary of compacted messages rides at the front of the first user message. */
function prependSummary(messages: AgentMessage[], summary: string): void {
  const index = messages.findIndex((message) => message.role === "user");
  const first = messages[index];
  if (!first || first.role !== "user") return;
  const block = {
    type: "text" as const,
    text: `[Summary of earlier conversation]\n${summary}\n[End of summary]`,
  };
  const content =
    typeof first.content === "string" ? [{ type: "text" as const, text: first.content }] : first.content;
  messages[index] = { ...first, content: [block, ...content] };
}
