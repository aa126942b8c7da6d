import { createHash } from "node:crypto";
import type { Queryable } from "../db/database.js";
import { MAIN_AGENT_ID } from "../db/messages.js";
import { htmlToText } from "../tools/html-text.js";

/** What one chunk is made from: a turn, a memory, a scratchpad entry, a compaction summary, a page. */
export type ChunkSource = "turn" | "memory" | "scratchpad" | "compaction" | "page";

interface Chunk {
  source: ChunkSource;
  sourceId: number;
  agentId: number;
  at: Date;
  content: string;
  /** No words to embed: kept as `empty`, never sent. */
  empty: boolean;
}

/** What one pass over the user messages saw: where the next may start. */
export interface TurnPass {
  /** The oldest turn still running (a later pass must look at it again). */
  firstOpenId: number | undefined;
  /** The last user message looked at. */
  lastId: number | undefined;
  /** The pass took as many as it may: more may follow. */
  full: boolean;
}

/** Turns looked at in one pass (the first start on a long history takes several passes). */
const TURNS_PER_PASS = 2_000;
/** A turn whose inbox entry never finished is indexed with what it has after this long. */
const OPEN_TURN_MINUTES = 10;
/** A page's text indexed at most (an embedding model reads a few thousand words). */
const PAGE_CHARS = 8_000;
/** The latest version of each page that is not a tombstone. */
const LATEST_PAGES = `SELECT * FROM (SELECT DISTINCT ON (path) id, path, mimetype, data, created_at FROM pages
  ORDER BY path, version DESC) latest WHERE octet_length(data) > 0`;

/**
 * Brings the chunks of `identity` up to date with the tables: a row for each finished turn,
 * memory, scratchpad entry and compaction summary that has none, a changed one made pending again,
 * a removed one's row deleted. Turns are read from `fromUserMessageId` on, at most one pass of
 * them; the caller passes again after `lastId` while a pass is `full` (`turnsOnly`: the rest is
 * done).
 */
export async function syncChunks(
  db: Queryable,
  identity: string,
  options: { fromUserMessageId?: number; turnsPerPass?: number; turnsOnly?: boolean } = {},
): Promise<{ changed: number } & TurnPass> {
  const turns = await turnChunks(
    db,
    identity,
    options.fromUserMessageId ?? 0,
    options.turnsPerPass ?? TURNS_PER_PASS,
  );
  if (options.turnsOnly) {
    const changed = await upsertChunks(db, identity, turns.chunks);
    return { changed, firstOpenId: turns.firstOpenId, lastId: turns.lastId, full: turns.full };
  }
  const knowledge = await knowledgeChunks(db);
  const compactions = await compactionChunks(db, identity);
  const pages = await pageChunks(db, identity);
  const changed = await upsertChunks(db, identity, [...turns.chunks, ...knowledge, ...compactions, ...pages]);
  // A page's older versions and deleted pages leave no chunk.
  await db.query(
    `DELETE FROM embedding_chunks c WHERE c.source = 'page' AND c.source_id NOT IN (SELECT id FROM (${LATEST_PAGES}) p)`,
  );
  // Memories and scratchpad entries removed (by the tool or by execute_sql) leave no chunk.
  await db.query(
    `DELETE FROM embedding_chunks c WHERE c.source = 'memory' AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = c.source_id)`,
  );
  await db.query(
    `DELETE FROM embedding_chunks c WHERE c.source = 'scratchpad' AND NOT EXISTS (SELECT 1 FROM scratchpad s WHERE s.id = c.source_id)`,
  );
  return { changed, firstOpenId: turns.firstOpenId, lastId: turns.lastId, full: turns.full };
}

/**
 * Finished turns with no chunk yet: each user message with the assistant's words after it, up to
 * the next user message of the same conversation. A turn is finished when a later user message
 * exists, its inbox entry is done, or it is older than OPEN_TURN_MINUTES.
 */
async function turnChunks(
  db: Queryable,
  identity: string,
  fromId: number,
  perPass: number,
): Promise<{ chunks: Chunk[] } & TurnPass> {
  const rows = await db.query<{
    id: number;
    agent_id: number;
    created_at: Date | string;
    user_text: string | null;
    closed: boolean;
    indexed: boolean;
    source: string | null;
    who: string | null;
    answer: string | null;
  }>(
    // The next user message of the same conversation is looked up per row (messages_agent), so a
    // pass costs its own rows however long the history after it is.
    `WITH users AS (
       SELECT m.id, m.agent_id, m.created_at, m.search_text, m.inbox_id FROM messages m
       WHERE m.role = 'user' AND m.id >= $2 ORDER BY m.id LIMIT $3
     ), nexts AS (
       SELECT u.*, (SELECT n.id FROM messages n WHERE n.agent_id = u.agent_id AND n.id > u.id AND n.role = 'user'
                    ORDER BY n.id LIMIT 1) AS next_id
       FROM users u
     ), looked AS (
       SELECT u.*, i.source,
         coalesce(i.payload->>'from', CASE WHEN u.agent_id = ${MAIN_AGENT_ID} THEN 'owner' ELSE i.sender END) AS who,
         (u.next_id IS NOT NULL OR i.status IN ('done', 'failed')
           OR u.created_at < now() - interval '${OPEN_TURN_MINUTES} minutes') AS closed,
         EXISTS (SELECT 1 FROM embedding_chunks c
                 WHERE c.identity = $1 AND c.source = 'turn' AND c.source_id = u.id) AS indexed
       FROM nexts u LEFT JOIN inbox i ON i.id = u.inbox_id
     )
     SELECT l.id, l.agent_id, l.created_at, l.search_text AS user_text, l.closed, l.indexed, l.source, l.who,
       CASE WHEN l.closed AND NOT l.indexed THEN
         (SELECT string_agg(a.search_text, E'\\n' ORDER BY a.id) FROM messages a
          WHERE a.agent_id = l.agent_id AND a.role = 'assistant' AND a.id > l.id
            AND (l.next_id IS NULL OR a.id < l.next_id) AND a.search_text IS NOT NULL)
       END AS answer
     FROM looked l ORDER BY l.id`,
    [identity, fromId, perPass],
  );
  const chunks: Chunk[] = [];
  let next: number | undefined;
  for (const row of rows.rows) {
    if (!row.closed) {
      next ??= row.id;
      continue;
    }
    if (row.indexed) continue;
    const at = new Date(row.created_at);
    const user = withoutEnvelope(row.user_text ?? "");
    const answer = row.answer?.trim() ?? "";
    const header = chunkHeader(at, row.source ?? "console", row.who ?? "owner");
    chunks.push({
      source: "turn",
      sourceId: row.id,
      agentId: row.agent_id,
      at,
      content: `${header}\nUser: ${user}${answer ? `\nAssistant: ${answer}` : ""}`,
      empty: user.length === 0 && answer.length === 0,
    });
  }
  return {
    chunks,
    firstOpenId: next,
    lastId: rows.rows.at(-1)?.id,
    full: rows.rows.length === perPass,
  };
}

async function knowledgeChunks(db: Queryable): Promise<Chunk[]> {
  const memories = await db.query<{ id: number; content: string; updated_at: Date | string }>(
    "SELECT id, content, updated_at FROM memories ORDER BY id",
  );
  const scratchpad = await db.query<{ id: number; title: string; body: string; updated_at: Date | string }>(
    "SELECT id, title, body, updated_at FROM scratchpad ORDER BY id",
  );
  return [
    ...memories.rows.map((row): Chunk => {
      const at = new Date(row.updated_at);
      return {
        source: "memory",
        sourceId: row.id,
        agentId: MAIN_AGENT_ID,
        at,
        content: `${chunkHeader(at, "memory", "assistant")}\n${row.content.trim()}`,
        empty: row.content.trim().length === 0,
      };
    }),
    ...scratchpad.rows.map((row): Chunk => {
      const at = new Date(row.updated_at);
      const text = `${row.title.trim()}\n${row.body.trim()}`.trim();
      return {
        source: "scratchpad",
        sourceId: row.id,
        agentId: MAIN_AGENT_ID,
        at,
        content: `${chunkHeader(at, "scratchpad", "assistant")}\n${text}`,
        empty: text.length === 0,
      };
    }),
  ];
}

/** The latest version of each page the index lacks, as text (an HTML page's words). */
async function pageChunks(db: Queryable, identity: string): Promise<Chunk[]> {
  const rows = await db.query<{
    id: number;
    path: string;
    mimetype: string;
    data: Uint8Array;
    created_at: Date | string;
  }>(
    `SELECT p.id, p.path, p.mimetype, p.data, p.created_at FROM (${LATEST_PAGES}) p
     WHERE p.mimetype LIKE 'text/%' AND NOT EXISTS (SELECT 1 FROM embedding_chunks c
       WHERE c.identity = $1 AND c.source = 'page' AND c.source_id = p.id)
     ORDER BY p.id LIMIT 200`,
    [identity],
  );
  return rows.rows.map((row) => {
    const at = new Date(row.created_at);
    const raw = Buffer.from(row.data).toString("utf8");
    const text = (row.mimetype.startsWith("text/html") ? htmlToText(raw) : raw).trim().slice(0, PAGE_CHARS);
    return {
      source: "page",
      sourceId: row.id,
      agentId: MAIN_AGENT_ID,
      at,
      content: `${chunkHeader(at, `page ${row.path}`, "assistant")}
${text}`,
      empty: text.length === 0,
    };
  });
}

async function compactionChunks(db: Queryable, identity: string): Promise<Chunk[]> {
  const rows = await db.query<{ id: number; agent_id: number; summary: string; created_at: Date | string }>(
    `SELECT k.id, k.agent_id, k.summary, k.created_at FROM compactions k
     WHERE NOT EXISTS (SELECT 1 FROM embedding_chunks c
                       WHERE c.identity = $1 AND c.source = 'compaction' AND c.source_id = k.id)
     ORDER BY k.id LIMIT 500`,
    [identity],
  );
  return rows.rows.map((row) => {
    const at = new Date(row.created_at);
    return {
      source: "compaction",
      sourceId: row.id,
      agentId: row.agent_id,
      at,
      content: `${chunkHeader(at, "summary of earlier conversation", "assistant")}\n${row.summary.trim()}`,
      empty: row.summary.trim().length === 0,
    };
  });
}

/**
 * A user message's own words: the "Time: / Source: / Sender: / Text: " lines the model is given
 * (agent/prompt.ts) are said once by the chunk's header instead.
 */
export function withoutEnvelope(text: string): string {
  const match = /^Time: [^\n]*\nSource: [^\n]*\nSender: [^\n]*(?:\nText: )?/.exec(text);
  return (match ? text.slice(match[0].length) : text).trim();
}

/** "[2026-03-14 09:30 UTC · telegram · owner]": when, where, who. */
export function chunkHeader(at: Date, channel: string, who: string): string {
  return `[${at.toISOString().slice(0, 16).replace("T", " ")} UTC · ${channel} · ${who}]`;
}

export function contentHash(content: string): string {
  return createHash("sha256").update(content).digest("hex").slice(0, 32);
}

/** Inserts new chunks; a chunk whose text changed is made pending again (its vector dropped). */
async function upsertChunks(db: Queryable, identity: string, chunks: Chunk[]): Promise<number> {
  let changed = 0;
  for (let start = 0; start < chunks.length; start += 500) {
    const part = chunks.slice(start, start + 500);
    const result = await db.query(
      `INSERT INTO embedding_chunks (identity, source, source_id, agent_id, source_at, content, content_hash, status)
       SELECT $1, source, source_id, agent_id, source_at, content, content_hash, status
       FROM unnest($2::text[], $3::int[], $4::int[], $5::timestamptz[], $6::text[], $7::text[], $8::text[])
         AS t (source, source_id, agent_id, source_at, content, content_hash, status)
       ON CONFLICT (identity, source, source_id) DO UPDATE SET
         agent_id = EXCLUDED.agent_id, source_at = EXCLUDED.source_at, content = EXCLUDED.content,
         content_hash = EXCLUDED.content_hash, status = EXCLUDED.status, embedding = NULL,
         attempts = 0, next_attempt_at = now(), last_error = NULL, embedded_at = NULL
       WHERE embedding_chunks.content_hash <> EXCLUDED.content_hash`,
      [
        identity,
        part.map((chunk) => chunk.source),
        part.map((chunk) => chunk.sourceId),
        part.map((chunk) => chunk.agentId),
        part.map((chunk) => chunk.at.toISOString()),
        part.map((chunk) => chunk.content),
        part.map((chunk) => contentHash(chunk.content)),
        part.map((chunk) => (chunk.empty ? "empty" : "pending")),
      ],
    );
    changed += result.rowCount;
  }
  return changed;
}
