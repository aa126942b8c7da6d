import { Agent, type AgentMessage, type StreamFn, type ThinkingLevel } from "@mariozechner/pi-agent-core";
import {
  type Api,
  type AssistantMessage,
  type Model,
  type TextContent,
  type UserMessage,
} from "@mariozechner/pi-ai";
import { errorMessage, sanitizeDeep, type Logger } from "@stavrobot/common";
import { isDatabaseUnavailable, type Database } from "../db/database.js";
import type { ConversationStore } from "./conversation.js";
import type { Conversation } from "../db/messages.js";
import { RowWrite } from "../db/row-write.js";
import type { StatementPart } from "../db/database.js";
import { ToolError, type AnyAgentTool } from "../tools/result.js";
import type { ApiKeySource } from "../model/model.js";
import { refusedCall } from "../model/refused.js";
import { modelStreamVia, type ModelStream } from "../model/stream.js";
import { redactToolCalls, scrubToolResult, type ArgumentRedactor } from "./redact.js";
import { ToolRounds } from "./tool-rounds.js";
import { requestOverhead, type TokenBudget } from "./tokens.js";
import { truncateToBudget } from "./truncate.js";
import type { TurnProgressEvent } from "../live/progress.js";
import { reportProgress } from "./progress.js";
import { isRetryableProviderError } from "./provider-errors.js";

export interface TurnDeps {
  db: Database;
  /** The conversation, kept in memory between turns; every save goes through it. */
  conversation: ConversationStore;
  /** The inbox row's lifecycle: the change that starts an entry's turn, written with its user message. */
  lifecycle: { processing(inboxId: number, countAttempt: boolean): StatementPart };
  model: Model<Api>;
  thinkingLevel: ThinkingLevel;
  maxTokens: number | undefined;
  /** The most rounds of tool calls one turn may take (`maxToolRounds`). */
  maxToolRounds: number;
  tools: () => AnyAgentTool[];
  /** How the model is called (default: pi-ai's `streamSimple`). */
  stream?: ModelStream;
  systemPrompt: () => Promise<string>;
  getApiKey: ApiKeySource;
  budget: TokenBudget;
  logger: Logger;
  /** What to tell the sender when no provider key is configured. */
  missingKeyMessage: string;
  /** Per tool name: how its call arguments are redacted before they are stored. */
  redactors?: Record<string, ArgumentRedactor>;
  /**
   * Told of every error the provider answered with (after the request reached it), e.g. to
   * invalidate credentials on a 401 and send the owner the login link. Must not throw.
   */
  onProviderError?: (message: string) => Promise<void>;
  /** Asked before every model call: a reason not to make it (a used-up budget), or undefined. */
  refuseModelCall?: () => string | undefined;
  /** Told of every answer the model gave (its usage and cost), in order. Must not throw. */
  onModelCall?: (inboxId: number, message: AssistantMessage) => void;
  /** Told after every tool call (caches a tool may have made stale). Must not throw. */
  afterTool?: (name: string, args: unknown) => void;
  /** Told what the turn writes and runs as it happens (its sender may be following). */
  progress?: (inboxId: number, event: TurnProgressEvent) => void;
  /** The trust gate (trust/gate.ts): told of the turn's context and each result, asked before each call. */
  gate?: TurnGate;
  /**
   * Recall before a turn (embeddings/recall.ts): snippets for the message being answered that the
   * context does not hold, put before it in the turn's copy only. Must not throw for long: a turn
   * waits for it at most RECALL_WAIT_MS.
   */
  recall?: (context: {
    fromMessageId: number | undefined;
    summaryId: number | undefined;
  }) => Promise<{ text: string; outside: string | undefined } | undefined>;
}

/** How long a turn waits for its recall before going on without it. */
const RECALL_WAIT_MS = 3_000;

/**
 * The tool behind the gate: the tool's own refusals first (a tool's `precheck`: a recipient not
 * allowed, an action this agent may not use), then the gate, then the call.
 */
function gatedTool(tool: AnyAgentTool, gate: TurnGate): AnyAgentTool {
  return {
    ...tool,
    execute: async (id, params, signal, onUpdate) => {
      await (tool as PrecheckedTool).precheck?.(params);
      const reason = await gate.check(tool.name, params);
      if (reason !== undefined) throw new ToolError(reason);
      return tool.execute(id, params, signal, onUpdate);
    },
  };
}

/** A tool that can say, without doing anything, that it would refuse a call. */
export type PrecheckedTool = AnyAgentTool & { precheck?: (params: unknown) => Promise<void> };

/** What the turn asks of the trust gate. */
export interface TurnGate {
  /**
   * `earlier`: the labels of the summary of earlier conversation and of the snippets recalled into
   * the turn, when they have any.
   */
  begin(
    inboxId: number,
    context: readonly AgentMessage[],
    earlier?: { summary?: string | undefined; recalled?: string | undefined },
  ): Promise<void>;
  /** Why the call may not run (the model gets it as the call's error), or undefined. */
  check(tool: string, args: unknown): Promise<string | undefined>;
  /** A result came back; its provenance when it is outside text. */
  observe(
    tool: string,
    text: string,
    details?: unknown,
  ): { kind: "contact" | "outside"; from: string } | undefined;
  end(): void;
}

export type TurnOutcome =
  | { kind: "reply"; text: string }
  | { kind: "aborted" }
  | {
      kind: "error";
      message: string;
      retryable: boolean;
      progressSaved: boolean;
      /** The database went away mid-turn: the queue waits for it, then replays or settles. */
      databaseDown?: boolean;
    };

/**
 * How a turn's entry becomes `processing`: counting an attempt, resuming one after a database
 * outage (not counted), or already so (saved `processing` with the attempt counted).
 */
export type TurnStart = "count" | "resume" | "started";

interface PendingSteer {
  inboxId: number;
  message: UserMessage;
  /** Given before the turn started: written with the turn's next write (see `run`). */
  early?: boolean;
}

/**
 * Runs one turn: the history from the database plus the new user message, through a fresh
 * pi-agent-core Agent, saving every message as it completes. Errors come back as values.
 */
export class TurnEngine {
  private agent: Agent | undefined;
  private steers: PendingSteer[] = [];
  private running = false;
  /** `abort` was called for the running turn. */
  private stopped = false;
  private summarised:
    { from: UserMessage; summary: string; message: UserMessage; block: TextContent } | undefined;
  /** Whether the running turn's entry is written (a failed write stops it: it takes no steering). */
  private write = RowWrite.written();

  constructor(private readonly deps: TurnDeps) {}

  /** A turn runs: from `run` to its outcome, its preparation (the history, the prompt) included. */
  get busy(): boolean {
    return this.running;
  }

  /**
   * Injects an owner's message into the running turn (one that comes while the turn is prepared
   * is taken in before the model's first call). False when no turn is running.
   */
  steer(inboxId: number, message: UserMessage): boolean {
    if (!this.running || this.write.failed) return false;
    this.steers.push({ inboxId, message, early: !this.agent });
    this.agent?.steer(message);
    return true;
  }

  /** Stops the running turn (one still being prepared stops before the model's first call). */
  abort(): boolean {
    if (!this.running) return false;
    this.stopped = true;
    this.agent?.abort();
    return true;
  }

  /**
   * Runs the entry's turn. The entry becomes `processing` in the same commit as its user message
   * (see TurnStart). An entry `started` already is: its user message (kept in the inbox entry
   * meanwhile) is written with the turn's first write instead of a commit of its own. The turn's
   * last messages may still be waiting in the conversation store: the caller writes them with the
   * entry's end. `steers` are owners' messages taken in before the model's first call; they are
   * written with the turn's next write, so an attempt that fails before any is made (and is tried
   * again, `dropDeferred`) has not kept them.
   */
  async run(
    inboxId: number,
    userMessage: UserMessage,
    start: TurnStart = "count",
    write = RowWrite.written(),
    steers: { inboxId: number; message: UserMessage }[] = [],
  ): Promise<TurnOutcome> {
    this.running = true;
    this.stopped = false;
    this.steers = steers.map((steer) => ({ ...steer, early: true }));
    try {
      return await this.runAttempt(inboxId, userMessage, start, write);
    } finally {
      this.running = false;
      this.steers = [];
    }
  }

  private async runAttempt(
    inboxId: number,
    userMessage: UserMessage,
    start: TurnStart,
    write: RowWrite,
  ): Promise<TurnOutcome> {
    const progress = { saved: false };
    // Whatever an abandoned attempt left unwritten is not part of this one.
    this.deps.conversation.dropDeferred();
    // An entry still being written: nothing of its turn is written before it is, and if the
    // write fails the turn stops (its sender was told the message was not saved).
    this.deps.conversation.holdWritesUntil(write.pending ? write.done : undefined);
    this.write = write;
    write.onFailure(() => {
      if (this.write === write) this.agent?.abort();
    });
    try {
      return await this.runTurn(inboxId, userMessage, progress, start);
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error;
      // A write may have landed without its answer: read the conversation again next time.
      this.deps.conversation.invalidate();
      return databaseDown(error, progress.saved);
    }
  }

  private async runTurn(
    inboxId: number,
    userMessage: UserMessage,
    progress: { saved: boolean },
    start: TurnStart,
  ): Promise<TurnOutcome> {
    const { deps } = this;
    const apiKey = await deps.getApiKey(deps.model.provider);
    if (!apiKey)
      return { kind: "error", message: deps.missingKeyMessage, retryable: false, progressSaved: false };

    // Both may need a query (after SQL the model ran, each checks its copy): side by side.
    const prompt = deps.systemPrompt();
    prompt.catch(() => {});
    const messages = await this.history(inboxId, userMessage, start);
    const conversation = await deps.conversation.current();
    const recalled = await this.recall(messages, conversation);
    await deps.gate?.begin(inboxId, messages, {
      summary: conversation.summary?.provenance,
      recalled: recalled?.outside,
    });
    const maxTokens = deps.maxTokens;
    const stream = deps.stream ?? modelStreamVia(undefined);
    // Whether the latest model call got as far as a request to the provider: an error before that
    // (the library refusing the history, a message it cannot convert) happens again on a retry.
    let reachedProvider = false;
    const rounds = new ToolRounds(deps.maxToolRounds);
    let capped = false;
    const streamFn: StreamFn = (model, context, options) => {
      reachedProvider = false;
      // A model that keeps calling tools: its next call is not made, the turn ends (below). A
      // turn being stopped with /stop ends as aborted instead.
      if (rounds.reached && !options?.signal?.aborted) {
        capped = true;
        return refusedCall(model, `stopped after ${rounds.cap} tool rounds`);
      }
      // Answered as an error on the stream, the Agent reports it as the turn's error; no request
      // was made.
      const refusal = deps.refuseModelCall?.();
      if (refusal) return refusedCall(model, refusal);
      return stream(model, context, {
        ...options,
        ...(maxTokens ? { maxTokens } : {}),
        cacheRetention: "short",
        onRequest: () => (reachedProvider = true),
      });
    };
    const systemPrompt = await prompt;
    const gate = deps.gate;
    // The trust gate decides in code whether a call runs (an outsider's words never act alone).
    const tools = gate ? deps.tools().map((tool) => gatedTool(tool, gate)) : deps.tools();
    // What the messages of a request may take: the budget less the system prompt and the tools.
    const room = deps.budget.truncateAbove - requestOverhead(systemPrompt, tools);
    // The summary of compacted messages is never cut, whatever else has to go.
    const summaryBlock = this.summarised?.block;
    /** Results that are outside text, by call id: their rows keep where they came from. */
    const outside = new Map<string, { kind: "contact" | "outside"; from: string }>();
    const agent = new Agent({
      initialState: {
        systemPrompt,
        model: deps.model,
        thinkingLevel: deps.thinkingLevel,
        tools,
        messages,
      },
      getApiKey: (provider) => deps.getApiKey(provider),
      streamFn,
      transformContext: async (context) => truncateToBudget(context, room, summaryBlock),
      // Tool output (a plugin printing binary) may hold text the database and the wire refuse.
      afterToolCall: async ({ toolCall, args, result }) => {
        deps.afterTool?.(toolCall.name, args);
        const provenance = deps.gate?.observe(
          toolCall.name,
          result.content.map((block) => (block.type === "text" ? block.text : "")).join("\n"),
          result.details,
        );
        if (provenance) outside.set(toolCall.id, provenance);
        return { content: sanitizeDeep(result.content) };
      },
    });

    let saveFailure: unknown;
    /** Secrets found in redacted tool calls, by call id, to scrub from their results. */
    const secrets = new Map<string, string[]>();
    const unsubscribe = agent.subscribe(async (event) => {
      if (event.type !== "message_end" || saveFailure) return;
      const message = event.message;
      try {
        if (message.role === "user") {
          const steer = this.claimSteer(message);
          if (steer) await deps.conversation.save(message, steer.inboxId, { defer: steer.early === true });
        } else if (message.role === "assistant") {
          deps.onModelCall?.(inboxId, message);
          if (message.stopReason === "error" || message.stopReason === "aborted") return;
          rounds.count(message);
          const redacted = redactToolCalls(message, deps.redactors ?? {});
          for (const [id, found] of redacted.secrets) secrets.set(id, found);
          // Tools run next: their call is on disk before they do. A final answer is written with
          // the entry's end, before anyone sees it.
          const callsTools = message.content.some((block) => block.type === "toolCall");
          await deps.conversation.save(redacted.message, inboxId, { defer: !callsTools });
          if (callsTools) progress.saved = true;
        } else if (message.role === "toolResult") {
          // Its effect is the next model call: written with the next save.
          const found = secrets.get(message.toolCallId);
          const scrubbed = found ? scrubToolResult(message, found) : message;
          const provenance = outside.get(message.toolCallId);
          const labelled = provenance ? ({ ...scrubbed, provenance } as AgentMessage) : scrubbed;
          await deps.conversation.save(labelled, inboxId, {
            defer: true,
          });
        }
      } catch (error) {
        saveFailure = error;
        agent.abort();
      }
    });

    const unfollow = reportProgress(agent, (event) => deps.progress?.(inboxId, event));
    this.agent = agent;
    // Steering given before the agent existed: taken in before the model's first call.
    for (const steer of this.steers) agent.steer(steer.message);
    try {
      if (this.write.failed) return { kind: "aborted" };
      if (this.stopped) {
        // Stopped while it was prepared: the model was never asked.
        await deps.conversation.save(cancellationNote(), inboxId);
        return { kind: "aborted" };
      }
      await agent.continue();
    } catch (error) {
      // Thrown, not reported by the provider: the loop itself refused (e.g. a history that cannot
      // be continued). The same history would fail the same way, so it is never retried.
      return { kind: "error", message: errorMessage(error), retryable: false, progressSaved: progress.saved };
    } finally {
      unsubscribe();
      unfollow();
      deps.gate?.end();
      this.agent = undefined;
    }
    const progressSaved = progress.saved;

    if (saveFailure) {
      if (isDatabaseUnavailable(saveFailure)) {
        deps.conversation.invalidate();
        return databaseDown(saveFailure, progressSaved);
      }
      deps.logger.error("saving a message failed", { error: saveFailure });
      return {
        kind: "error",
        message: `could not save the conversation: ${errorMessage(saveFailure)}`,
        retryable: false,
        progressSaved,
      };
    }
    if (capped) {
      // Written with the turn's tool results still waiting: the next turn knows where this one stopped.
      await deps.conversation.save(rounds.note(), inboxId);
      deps.logger.warn("turn stopped at the tool round cap", { inboxId, rounds: rounds.cap });
      return { kind: "reply", text: rounds.reply() };
    }
    const last = agent.state.messages[agent.state.messages.length - 1];
    if (last?.role !== "assistant")
      return {
        kind: "error",
        message: "the agent stopped without answering",
        retryable: !progressSaved,
        progressSaved,
      };
    if (last.stopReason === "aborted") {
      // The next turn should know the request was dropped on purpose, not forgotten.
      await deps.conversation.save(cancellationNote(), inboxId);
      return { kind: "aborted" };
    }
    if (last.stopReason === "error") {
      const message = last.errorMessage ?? "unknown provider error";
      if (reachedProvider) await deps.onProviderError?.(message).catch(() => undefined);
      return {
        kind: "error",
        message,
        retryable: !progressSaved && reachedProvider && isRetryableProviderError(message),
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

  /**
   * History as the model should see it, with this turn's user message last (saved first). A replayed
   * entry sees the conversation up to its own user message: anything saved after it by other
   * entries (possible only after an outage or a crash) is not part of its turn.
   */
  private async history(
    inboxId: number,
    userMessage: UserMessage,
    start: TurnStart,
  ): Promise<AgentMessage[]> {
    const conversation = await this.deps.conversation.current();
    const messages: AgentMessage[] = [];
    let found = false;
    for (const row of conversation.messages) {
      if (found) break;
      if (row.inboxId === inboxId && row.message.role === "user") {
        // On a retry the saved copy lacks image data: use the full message built for this turn.
        messages.push(userMessage);
        found = true;
      } else if (row.inboxId !== inboxId) {
        messages.push(row.message);
      }
    }
    if (!found && start === "started") {
      await this.deps.conversation.save(userMessage, inboxId, { defer: true });
      messages.push(userMessage);
    } else if (!found) {
      const companion = this.deps.lifecycle.processing(inboxId, start === "count");
      await this.deps.conversation.save(userMessage, inboxId, { companion });
      messages.push(userMessage);
    } else {
      await this.deps.conversation.flush(this.deps.lifecycle.processing(inboxId, start !== "resume"));
    }
    if (conversation.summary) this.prependSummary(messages, conversation.summary.text);
    return messages;
  }

  /**
   * Recalled snippets go before this turn's message in the turn's copy (never stored: the next
   * turn recalls afresh). Only for a turn that starts from its message (not one resumed after its
   * tools ran), and never for longer than RECALL_WAIT_MS.
   */
  private async recall(
    messages: AgentMessage[],
    conversation: Conversation,
  ): Promise<{ text: string; outside: string | undefined } | undefined> {
    const last = messages[messages.length - 1];
    if (!this.deps.recall || last?.role !== "user") return undefined;
    let timer: NodeJS.Timeout | undefined;
    const recalled = await Promise.race([
      this.deps
        .recall({ fromMessageId: conversation.messages[0]?.id, summaryId: conversation.summary?.id })
        .catch((error: unknown) => {
          this.deps.logger.warn("recall failed; the turn goes on without it", { error: errorMessage(error) });
          return undefined;
        }),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), RECALL_WAIT_MS);
      }),
    ]).finally(() => clearTimeout(timer));
    if (!recalled) return undefined;
    const content =
      typeof last.content === "string" ? [{ type: "text" as const, text: last.content }] : last.content;
    messages[messages.length - 1] = { ...last, content: [{ type: "text", text: recalled.text }, ...content] };
    return recalled;
  }

  /**
   * The summary of compacted messages rides at the front of the first user message. The combined
   * message is kept while neither changes: the same object every turn lets the request reuse what
   * it encoded before (`model/anthropic`).
   */
  private prependSummary(messages: AgentMessage[], summary: string): void {
    const index = messages.findIndex((message) => message.role === "user");
    const first = messages[index];
    if (!first || first.role !== "user") return;
    const kept = this.summarised;
    if (kept?.from === first && kept.summary === summary) {
      messages[index] = kept.message;
      return;
    }
    const block = {
      type: "text" as const,
      text: `[Summary of earlier conversation]\n${summary}\n[End of summary]`,
    };
    const content =
      typeof first.content === "string" ? [{ type: "text" as const, text: first.content }] : first.content;
    const message: UserMessage = { ...first, content: [block, ...content] };
    this.summarised = { from: first, summary, message, block };
    messages[index] = message;
  }

  private claimSteer(message: AgentMessage): PendingSteer | undefined {
    const index = this.steers.findIndex(
      (steer) => steer.message === message || steer.message.timestamp === (message as UserMessage).timestamp,
    );
    if (index === -1) return undefined;
    return this.steers.splice(index, 1)[0];
  }
}

/** The reference's note, saved after `/stop` so the next turn knows the request was cancelled. */
export const CANCELLATION_NOTE = "[The user cancelled the previous request with /stop.]";

function cancellationNote(): UserMessage {
  return { role: "user", content: [{ type: "text", text: CANCELLATION_NOTE }], timestamp: Date.now() };
}

function databaseDown(error: unknown, progressSaved: boolean): TurnOutcome {
  return { kind: "error", message: errorMessage(error), retryable: false, progressSaved, databaseDown: true };
}
