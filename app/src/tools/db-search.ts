import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import { encode } from "@toon-format/toon";
import type { Queryable } from "../db/database.js";
import { MAIN_AGENT_ID } from "../db/messages.js";
import type { FusedResult } from "../embeddings/search.js";
import { outsideOrigins, type StoredHits } from "../trust/stored.js";
import { RESULT_LIMIT_BYTES, capText, outsideDetails, textResult } from "./result.js";

const parameters = Type.Object({
  query: Type.String({ description: "Words to look for." }),
  limit: Type.Optional(Type.Integer({ description: "Messages to return, default 10, at most 20." })),
});

/** The app's own tables are searched through the conversation, not as data tables. */
const INTERNAL_TABLES = new Set([
  "inbox",
  "messages",
  "compactions",
  "schema_version",
  "deliveries",
  "usage",
  "allowlist",
  "cron_entries",
  "pages",
  "agents",
  "interlocutors",
  "interlocutor_identities",
  "notifications",
  "embedding_chunks",
]);
const MAX_TABLE_ROWS = 5;
const SNIPPET_CHARS = 300;

/**
 * Full-text search (PostgreSQL, English configuration) over the whole conversation history,
 * compacted-away messages included, and over the text columns of the tables the assistant and
 * the owner keep (memories, scratchpad, anything made with execute_sql). The messages search uses
 * the `messages_search` GIN index, so it stays fast with a million stored messages.
 */
export interface DbSearchDeps {
  db: Queryable;
  /**
   * The agent whose turn runs: each agent searches its own conversation, and only the main agent
   * (the owner's) searches the tables, which hold the owner's memories and data.
   */
  currentAgentId?: () => number;
  /**
   * With `[embeddings]` configured: turns, memories, scratchpad entries and summaries found by
   * words and by meaning, fused (embeddings/search.ts); undefined before the index's first pass.
   * Without it, full text as before.
   */
  semantic?: (query: string, agentId: number, limit: number) => Promise<FusedResult | undefined>;
}

export function createDbSearchTool(deps: DbSearchDeps): AgentTool<typeof parameters> {
  const { db } = deps;
  return {
    name: "db_search",
    label: "Search",
    description: deps.semantic
      ? "Search by words and by meaning over the whole conversation history (each turn: what was said and the answer), your memories, scratchpad and earlier summaries, and your tables."
      : "Full-text search over the whole conversation history and your tables.",
    parameters,
    async execute(_id, params) {
      const query = params.query.trim();
      if (!query) return textResult('No results found for "".');
      const limit = Math.min(Math.max(params.limit ?? 10, 1), 20);
      const parts: string[] = [];
      let tableRows = 0;
      // What was found that entered from outside once: the result says so (trust/stored.ts).
      const found: { [K in keyof StoredHits]-?: number[] } = {
        messages: [],
        memories: [],
        scratchpad: [],
        compactions: [],
      };
      const result = async (text: string) =>
        textResult(text, outsideDetails(await outsideOrigins(db, found)));
      const agentId = deps.currentAgentId?.() ?? MAIN_AGENT_ID;
      const fused = await deps.semantic?.(query, agentId, limit);
      // Memories and the scratchpad are in the fused results when searching by meaning.
      const tables =
        agentId === MAIN_AGENT_ID
          ? (await searchableTables(db)).filter(
              (table) => !fused || !["memories", "scratchpad"].includes(table.name),
            )
          : [];
      for (const table of tables) {
        if (tableRows >= MAX_TABLE_ROWS) break;
        const document = table.columns
          .map((column) => `coalesce(${quote(column)}::text, '')`)
          .join(" || ' ' || ");
        const order = table.hasCreatedAt ? "ORDER BY created_at DESC" : "";
        const rows = await db.query<Record<string, unknown>>(
          `SELECT * FROM ${quote(table.name)}
           WHERE to_tsvector('english', ${document}) @@ plainto_tsquery('english', $1) ${order} LIMIT $2`,
          [query, MAX_TABLE_ROWS - tableRows],
        );
        if (rows.rows.length === 0) continue;
        tableRows += rows.rows.length;
        if (table.name === "memories" || table.name === "scratchpad")
          found[table.name].push(...rows.rows.map((row) => Number(row.id)));
        parts.push(
          `Table: ${table.name} (${rows.rows.length} match(es))\n${encode({ rows: rows.rows.map(plain) })}`,
        );
      }
      if (fused) {
        for (const hit of fused.hits) {
          if (hit.source === "turn") found.messages.push(hit.sourceId);
          else if (hit.source === "memory") found.memories.push(hit.sourceId);
          else if (hit.source === "scratchpad") found.scratchpad.push(hit.sourceId);
          else if (hit.source === "compaction") found.compactions.push(hit.sourceId);
        }
        if (fused.hits.length > 0) {
          const lines = fused.hits.map(
            (hit) =>
              `[${hit.source} ${hit.sourceId}] ${headerOf(hit.content) ?? `[${hit.at.toISOString()}]`} ${snippet(withoutHeader(hit.content), query)}`,
          );
          parts.push(`Found (${fused.hits.length}, best first):\n${lines.join("\n")}`);
        }
        if (fused.note) parts.push(`Note: ${fused.note}`);
        if (parts.length === 0 || (parts.length === 1 && fused.note))
          return textResult(`No results found for "${query}".${fused.note ? ` Note: ${fused.note}` : ""}`);
        return result(capText(parts.join("\n\n"), RESULT_LIMIT_BYTES, "Search for something narrower."));
      }
      const messages = await db.query<{
        id: number;
        role: string;
        created_at: Date | string;
        search_text: string;
      }>(
        // The matches come from the index first, then the newest are taken. Left to itself the
        // planner walks the messages newest first, computing each one's text vector until enough
        // match: fast for a common word, but seconds over a year of history for a rare one (a
        // rare word is what one searches for).
        `WITH matches AS MATERIALIZED (
           SELECT id FROM messages
           WHERE to_tsvector('english', coalesce(search_text, '')) @@ plainto_tsquery('english', $1)
             AND agent_id = $3
         )
         SELECT m.id, m.role, m.created_at, m.search_text FROM messages m
         WHERE m.id IN (SELECT id FROM matches ORDER BY id DESC LIMIT $2)
         ORDER BY m.id DESC`,
        [query, limit, agentId],
      );
      if (messages.rows.length > 0) {
        const lines = messages.rows.map(
          (row) =>
            `[id:${row.id}] [${new Date(row.created_at).toISOString()}] ${row.role}: ${snippet(row.search_text, query)}`,
        );
        parts.push(`Messages (${messages.rows.length} match(es)):\n${lines.join("\n")}`);
        found.messages.push(...messages.rows.map((row) => row.id));
      }
      if (parts.length === 0) return textResult(`No results found for "${query}".`);
      return result(capText(parts.join("\n\n"), RESULT_LIMIT_BYTES, "Search for something narrower."));
    },
  };
}

async function searchableTables(
  db: Queryable,
): Promise<{ name: string; columns: string[]; hasCreatedAt: boolean }[]> {
  const result = await db.query<{ table_name: string; column_name: string; data_type: string }>(
    `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
     JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
     WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position`,
  );
  const tables = new Map<string, { name: string; columns: string[]; hasCreatedAt: boolean }>();
  for (const row of result.rows) {
    if (INTERNAL_TABLES.has(row.table_name)) continue;
    const table = tables.get(row.table_name) ?? { name: row.table_name, columns: [], hasCreatedAt: false };
    if (["text", "character varying", "character"].includes(row.data_type))
      table.columns.push(row.column_name);
    if (row.column_name === "created_at") table.hasCreatedAt = true;
    tables.set(row.table_name, table);
  }
  return [...tables.values()].filter((table) => table.columns.length > 0);
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** A chunk's first line: "[date · channel · who]". */
function headerOf(content: string): string | undefined {
  const first = content.split("\n", 1)[0] ?? "";
  return first.startsWith("[") && first.endsWith("]") ? first : undefined;
}

/** A chunk's text after its header. */
function withoutHeader(content: string): string {
  return headerOf(content) ? content.slice(content.indexOf("\n") + 1) : content;
}

/** A window of the text around the first word of the query that appears in it. */
function snippet(text: string, query: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= SNIPPET_CHARS) return flat;
  const lower = flat.toLowerCase();
  const hit = query
    .toLowerCase()
    .split(/\s+/)
    .map((word) => lower.indexOf(word))
    .filter((index) => index >= 0)
    .sort((a, b) => a - b)[0];
  const start = Math.max(0, (hit ?? 0) - SNIPPET_CHARS / 3);
  return `${start > 0 ? "…" : ""}${flat.slice(start, start + SNIPPET_CHARS)}…`;
}

function plain(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(row).map(([key, value]) => [
      key,
      value instanceof Date
        ? value.toISOString()
        : value instanceof Uint8Array
          ? `<${value.length} bytes>`
          : value,
    ]),
  );
}
