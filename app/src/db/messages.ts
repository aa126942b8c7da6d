import { createHash } from "node:crypto";
import type { AgentMessage } from "@mariozechner/pi-agent-core";
import { sanitizeDeep, sanitizeText } from "@stavrobot/common";
import type { Queryable } from "./database.js";

export interface StoredMessage {
  id: number;
  inboxId: number | null;
  message: AgentMessage;
}

export interface Conversation {
  /** The latest compaction summary, covering every message up to `upToMessageId`. */
  summary:
    | { id?: number | undefined; text: string; upToMessageId: number; provenance?: string | undefined }
    | undefined;
  /** Messages after the summary, oldest first. */
  messages: StoredMessage[];
  /**
   * What the copy was read from: the latest compaction's row and every message row after it, as
   * `id:xmin` (a row's `xmin` changes whenever the row is written). Comparing it with the tables
   * tells whether anything else wrote them since (`conversationVersions`).
   */
  versions: string[];
}

/**
 * Saves one agent message as it completes. Image data is not kept in the history (it would be
 * resent on every turn); a short placeholder stands in its place. Text the database cannot store
 * (NUL, unpaired surrogates) is replaced by U+FFFD rather than failing the turn.
 */
export async function saveMessage(
  db: Queryable,
  message: AgentMessage,
  inboxId: number | null,
): Promise<number> {
  return insertStoredMessage(db, storedForm(message), inboxId);
}

/** A message as it is kept: without image data, with only text the database can store. */
export function storedForm(message: AgentMessage): AgentMessage {
  return sanitizeDeep(withoutImageData(message));
}

/** Inserts a message already in its stored form; returns its id. */
export async function insertStoredMessage(
  db: Queryable,
  stored: AgentMessage,
  inboxId: number | null,
): Promise<number> {
  const result = await db.query<{ id: number }>(
    "INSERT INTO messages (role, content, inbox_id, search_text) VALUES ($1, $2, $3, $4) RETURNING id",
    [stored.role, JSON.stringify(stored), inboxId, searchText(stored)],
  );
  return (result.rows[0] as { id: number }).id;
}

/** The main agent's id: the owner's conversation (migration 6 gives every older row to it). */
export const MAIN_AGENT_ID = 1;

/** One agent's conversation: its latest summary and every message of it after that. */
export async function loadConversation(db: Queryable, agentId = MAIN_AGENT_ID): Promise<Conversation> {
  const latest = await db.query<{
    id: number;
    summary: string;
    up_to_message_id: number;
    provenance: string | null;
    version: string;
  }>(
    "SELECT id, summary, up_to_message_id, provenance, id || ':' || xmin AS version FROM compactions WHERE agent_id = $1 ORDER BY id DESC LIMIT 1",
    [agentId],
  );
  const compaction = latest.rows[0];
  const rows = await db.query<{
    id: number;
    inbox_id: number | null;
    content: AgentMessage;
    version: string;
  }>(
    "SELECT id, inbox_id, content, id || ':' || xmin AS version FROM messages WHERE agent_id = $2 AND id > $1 ORDER BY id",
    [compaction?.up_to_message_id ?? 0, agentId],
  );
  const versions = [compaction?.version ?? "none", ...rows.rows.map((row) => row.version)];
  const messages = rows.rows.map((row) => ({ id: row.id, inboxId: row.inbox_id, message: row.content }));
  // A tool result whose call was summarised away would be rejected by the provider.
  while (messages[0]?.message.role === "toolResult") messages.shift();
  return {
    summary: compaction
      ? {
          id: compaction.id,
          text: compaction.summary,
          upToMessageId: compaction.up_to_message_id,
          ...(compaction.provenance ? { provenance: compaction.provenance } : {}),
        }
      : undefined,
    messages,
    versions,
  };
}

/**
 * The fingerprint of the versions `loadConversation` would give now (see `Conversation.versions`):
 * the latest compaction's version and an MD5 of the messages' versions in order, computed by the
 * database, so one short row comes back however long the conversation is.
 */
export async function conversationFingerprint(
  db: Queryable,
  afterMessageId: number,
  agentId = MAIN_AGENT_ID,
): Promise<string> {
  const result = await db.query<{ compaction: string | null; digest: string }>(
    `SELECT (SELECT id || ':' || xmin FROM compactions WHERE agent_id = $2 ORDER BY id DESC LIMIT 1) AS compaction,
       (SELECT md5(coalesce(string_agg(id || ':' || xmin, ',' ORDER BY id), '')) FROM messages
         WHERE agent_id = $2 AND id > $1) AS digest`,
    [afterMessageId, agentId],
  );
  const row = result.rows[0];
  return `${row?.compaction ?? "none"}|${row?.digest ?? ""}`;
}

/** The fingerprint of versions as `conversationFingerprint` computes it. */
export function fingerprintOf(versions: readonly string[]): string {
  const [compaction = "none", ...rows] = versions;
  return `${compaction}|${createHash("md5").update(rows.join(",")).digest("hex")}`;
}

export async function messagesForInbox(db: Queryable, inboxId: number): Promise<StoredMessage[]> {
  const rows = await db.query<{ id: number; inbox_id: number | null; content: AgentMessage }>(
    "SELECT id, inbox_id, content FROM messages WHERE inbox_id = $1 ORDER BY id",
    [inboxId],
  );
  return rows.rows.map((row) => ({ id: row.id, inboxId: row.inbox_id, message: row.content }));
}

/**
 * Saves a compaction summary; returns its row's version (`id:xmin`) and its label. The summary keeps the labels
 * of the outside text it summarises (trust/gate.ts): those of the messages since the previous
 * summary and that summary's own, so an instruction an outsider planted does not lose its label
 * by being summarised.
 */
export async function saveCompaction(
  db: Queryable,
  summary: string,
  upToMessageId: number,
  agentId = MAIN_AGENT_ID,
): Promise<{ version: string; provenance: string | undefined }> {
  if (summary.trim().length === 0) throw new Error("refusing to save an empty compaction summary");
  const result = await db.query<{ version: string; provenance: string | null }>(
    `WITH previous AS (
       SELECT up_to_message_id, provenance FROM compactions WHERE agent_id = $3 ORDER BY id DESC LIMIT 1
     ), origins AS (
       SELECT DISTINCT m.content->'provenance'->>'from' AS origin FROM messages m
       WHERE m.agent_id = $3 AND m.id <= $2 AND m.content ? 'provenance'
         AND m.id > coalesce((SELECT up_to_message_id FROM previous), 0)
       UNION
       SELECT btrim(unnest(string_to_array((SELECT provenance FROM previous), ', ')))
     )
     INSERT INTO compactions (summary, up_to_message_id, agent_id, provenance)
     VALUES ($1, $2, $3, (SELECT string_agg(origin, ', ' ORDER BY origin) FROM origins WHERE origin <> ''))
     RETURNING id || ':' || xmin AS version, provenance`,
    [sanitizeText(summary), upToMessageId, agentId],
  );
  const row = result.rows[0] as { version: string; provenance: string | null };
  return { version: row.version, provenance: row.provenance ?? undefined };
}

/** The words of a user or assistant message, for full-text search (tool traffic is left out). */
export function searchText(message: AgentMessage): string | null {
  if (message.role !== "user" && message.role !== "assistant") return null;
  const content = message.content;
  if (typeof content === "string") return content;
  const text = content
    .map((block) => (block.type === "text" ? block.text : ""))
    .filter((part) => part.length > 0)
    .join("\n");
  return text.length > 0 ? text : null;
}

function withoutImageData(message: AgentMessage): AgentMessage {
  if (message.role !== "user" && message.role !== "toolResult") return message;
  if (typeof message.content === "string") return message;
  if (!message.content.some((block) => block.type === "image")) return message;
  return {
    ...message,
    content: message.content.map((block) =>
      block.type === "image"
        ? { type: "text" as const, text: `[image (${block.mimeType}) not kept in history]` }
        : block,
    ),
  } as AgentMessage;
}
