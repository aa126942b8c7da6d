import type { AgentMessage } from "@mariozechner/pi-agent-core";
import type { StoredMessage } from "../db/messages.js";
import type { ConversationStore } from "./conversation.js";
import {
  SHORT_PROMPT,
  SUMMARY_PROMPT,
  serializeForSummary,
  summarise,
  type SummariserDeps,
  type SummaryOutcome,
} from "./summary.js";
import { estimateAll, estimateTokens, type TokenBudget } from "./tokens.js";
import { isTurnStart } from "./truncate.js";

export type { CompleteFn } from "./summary.js";

export interface CompactionDeps extends SummariserDeps {
  conversation: ConversationStore;
  budget: TokenBudget;
  /** Kept from one compaction to the next: whether the summariser may be asked now. */
  backoff: SummaryBackoff;
}

export type CompactionResult =
  | { compacted: true; upToMessageId: number; coveredMessages: number; by: "summary" | "truncation" }
  | { compacted: false; reason: string };

/** The most compactions in a row that truncate without asking a summariser that keeps failing. */
const MAX_SKIPS = 32;

/**
 * After the summariser fails (both prompts), the next compactions truncate without asking it:
 * 1 after the first failure in a row, then 2, 4, 8, … at most 32; a usable summary starts over.
 * Kept in memory: after a restart the summariser is asked again.
 */
export class SummaryBackoff {
  private failures = 0;
  private skips = 0;

  /** Whether this compaction may ask the summariser; when not, one skip is used up. */
  mayAsk(): boolean {
    if (this.skips === 0) return true;
    this.skips--;
    return false;
  }

  failed(): void {
    this.failures++;
    this.skips = Math.min(2 ** (this.failures - 1), MAX_SKIPS);
  }

  succeeded(): void {
    this.failures = 0;
    this.skips = 0;
  }
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

const TRUNCATION_NOTE = "[Older messages could not be summarised and were left out of the context";

/**
 * What a compaction without a summary saves in its place: the previous summary (still true) and a
 * note that older messages were left out, and where to find them. Earlier such notes are replaced.
 */
export function truncationSummary(previous: string | undefined, lastLeftOut: number | undefined): string {
  const when =
    lastLeftOut && lastLeftOut > 0
      ? ` (the newest of them from ${new Date(lastLeftOut).toISOString().slice(0, 16).replace("T", " ")} UTC)`
      : "";
  const note = `${TRUNCATION_NOTE}${when}. They are still in the database, where db_search finds them.]`;
  const kept = (previous ?? "")
    .split("\n")
    .filter((line) => !line.startsWith(TRUNCATION_NOTE))
    .join("\n")
    .trim();
  return kept ? `${kept}\n\n${note}` : note;
}

/**
 * Summarises the older messages once the conversation passes its budget, keeping the newest
 * ones verbatim. The summary is saved with the id of the last message it covers; history is then
 * reloaded as summary + newer messages. When the summariser gives nothing usable (or is backing
 * off after failing), the older messages are cut all the same: a note stands in for their summary.
 * An empty summary is never saved.
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
  const last = older[older.length - 1] as StoredMessage;
  const transcript =
    (conversation.summary ? `Summary of what came before:\n${conversation.summary.text}\n\n` : "") +
    serializeForSummary(older.map((row) => row.message));
  const outcome = await summaryOf(deps, transcript);
  if ("skipped" in outcome) {
    deps.logger.warn("compaction skipped", { reason: outcome.skipped });
    return { compacted: false, reason: outcome.skipped };
  }
  const details = { upToMessageId: last.id, messages: older.length };
  if ("summary" in outcome) {
    await deps.conversation.compact(outcome.summary, last.id);
    deps.logger.info("conversation compacted", details);
    return { compacted: true, upToMessageId: last.id, coveredMessages: older.length, by: "summary" };
  }
  const timestamp = (last.message as { timestamp?: number }).timestamp;
  await deps.conversation.compact(truncationSummary(conversation.summary?.text, timestamp), last.id);
  deps.logger.warn("conversation truncated without a summary", { ...details, reason: outcome.failed });
  return { compacted: true, upToMessageId: last.id, coveredMessages: older.length, by: "truncation" };
}

/** The full prompt, then the short one; a failure of both starts (or lengthens) the backoff. */
async function summaryOf(deps: CompactionDeps, transcript: string): Promise<SummaryOutcome> {
  if (!deps.backoff.mayAsk()) return { failed: "the summariser failed recently and is not asked this time" };
  const full = await summarise(deps, SUMMARY_PROMPT, transcript);
  if (!("failed" in full)) {
    if ("summary" in full) deps.backoff.succeeded();
    return full;
  }
  deps.logger.warn("compaction summary failed", { error: full.failed });
  const short = await summarise(deps, SHORT_PROMPT, transcript);
  if ("summary" in short) deps.backoff.succeeded();
  if ("failed" in short) {
    deps.logger.warn("compaction summary failed", { error: short.failed, prompt: "short" });
    deps.backoff.failed();
  }
  return short;
}
