import type { AgentMessage } from "@mariozechner/pi-agent-core";
import { withParts, type Queryable, type StatementPart } from "../db/database.js";
import {
  MAIN_AGENT_ID,
  conversationFingerprint,
  fingerprintOf,
  loadConversation,
  saveCompaction,
  searchText,
  storedForm,
  type Conversation,
  type StoredMessage,
} from "../db/messages.js";

/**
 * Another data-modifying statement written in the same statement (and so the same commit) as the
 * messages: e.g. the inbox entry moving to `processing`, or finishing (with the turn's usage rows).
 */
export type Companion = StatementPart;

interface Pending {
  stored: AgentMessage;
  inboxId: number | null;
}

/**
 * The conversation as the agent sees it (the latest compaction summary and every message after
 * it), kept in memory between turns so a turn does not read the whole history back, and written
 * with as few commits as durability allows:
 * - a message whose effect is outside (an assistant message calling tools: the tools run next) is
 *   written before `save()` returns;
 * - a message whose effect is only the next model call or the turn's end (a tool result, the final
 *   answer) may be deferred: it is written with the next immediate save or with the inbox update
 *   that ends the turn (`flush(companion)`), in one statement.
 * The copy in memory only ever holds what is written. It is read again from the database after
 * anything that may have changed the tables behind its back: a database outage (a write may have
 * landed without its answer), a start. After SQL the model ran (`recheck`), the tables' row
 * versions are compared with the copy's, and it is read again only if another statement wrote
 * them: a copy kept keeps its messages' request encoding.
 */
export class ConversationStore {
  private cached: Conversation | undefined;
  private loading: Promise<Conversation> | undefined;
  private deferred: Pending[] = [];
  /** Writes wait for this (the inbox row the messages belong to, still being inserted). */
  private gate: Promise<void> | undefined;
  /** Something may have written the tables behind the copy's back: compare versions before using it. */
  private uncertain = false;

  constructor(
    private readonly db: Queryable,
    /** Whose conversation this is (the main agent's unless a subagent's). */
    readonly agentId = MAIN_AGENT_ID,
    /** Told the transaction id of every write of its messages (see `CurrentTurn.lastWrite`). */
    private readonly onWrite?: (xid: number) => void,
  ) {}

  /** The current conversation as written (do not modify it). */
  async current(): Promise<Conversation> {
    if (this.cached && this.uncertain) await this.confirm(this.cached);
    if (this.cached) return this.cached;
    this.loading ??= loadConversation(this.db, this.agentId).then(
      (conversation) => {
        this.cached = conversation;
        this.loading = undefined;
        return conversation;
      },
      (error: unknown) => {
        this.loading = undefined;
        throw error;
      },
    );
    return this.loading;
  }

  /**
   * Stores a message: at once (with any deferred ones before it, and the companion statement if
   * given), or, with `defer`, with the next write.
   */
  async save(
    message: AgentMessage,
    inboxId: number | null,
    options: { defer?: boolean; companion?: Companion | Companion[] } = {},
  ): Promise<void> {
    this.deferred.push({ stored: storedForm(message), inboxId });
    if (!options.defer) await this.flush(options.companion);
  }

  /** Writes the deferred messages, with the companion statements if given (alone when none wait). */
  async flush(companion?: Companion | Companion[]): Promise<void> {
    // Throws when what it waited for failed: nothing is written, the deferred rows stay.
    if (this.gate) await this.gate;
    const rows = this.deferred;
    this.deferred = [];
    const companions = companion === undefined ? [] : Array.isArray(companion) ? companion : [companion];
    if (rows.length === 0) {
      if (companions.length === 0) return;
      const parts = withParts(companions, 1);
      await this.db.query(`${parts.sql}SELECT 1`, parts.params, { prepare: true });
      return;
    }
    let ids: { id: number; version: string }[];
    try {
      ids = await this.insert(rows, companions);
    } catch (error) {
      // Kept for the next attempt (the caller waits out an outage and tries again); the copy can
      // no longer be trusted either way.
      this.deferred = [...rows, ...this.deferred];
      this.invalidate();
      throw error;
    }
    if (this.loading) this.invalidate();
    this.cached?.messages.push(
      ...rows.map((row, i) => ({ id: ids[i]?.id as number, inboxId: row.inboxId, message: row.stored })),
    );
    this.cached?.versions.push(...ids.map((row) => row.version));
  }

  /**
   * SQL the model ran may have written the conversation's tables: before the copy is used again,
   * its row versions are compared with the tables', and it is read again if they differ.
   */
  recheck(): void {
    this.uncertain = true;
  }

  /** Keeps the copy when the tables hold exactly the rows it was read from (or wrote); forgets it otherwise. */
  private async confirm(cached: Conversation): Promise<void> {
    this.uncertain = false;
    const now = await conversationFingerprint(this.db, cached.summary?.upToMessageId ?? 0, this.agentId);
    if (this.cached !== cached) return;
    if (now !== fingerprintOf(cached.versions)) this.invalidate();
  }

  /** Until `saved` resolves, writes wait for it (and fail with it); undefined lifts the wait. */
  holdWritesUntil(saved: Promise<void> | undefined): void {
    this.gate = saved;
  }

  /** Forgets deferred messages (a turn that will run again from its start). */
  dropDeferred(): void {
    this.deferred = [];
  }

  /** Stores a compaction summary; the copy drops what it covers. */
  async compact(summary: string, upToMessageId: number): Promise<void> {
    const { version, provenance } = await saveCompaction(this.db, summary, upToMessageId, this.agentId);
    const cached = this.cached;
    if (!cached || this.loading) {
      this.invalidate();
      return;
    }
    const versions = [
      version,
      ...cached.versions.slice(1).filter((row) => Number(row.split(":")[0]) > upToMessageId),
    ];
    const messages = cached.messages.filter((row) => row.id > upToMessageId);
    while (messages[0]?.message.role === "toolResult") messages.shift();
    this.cached = {
      summary: {
        id: Number(version.split(":")[0]),
        text: summary,
        upToMessageId,
        ...(provenance ? { provenance } : {}),
      },
      messages,
      versions,
    };
  }

  /** Forget the copy: the next turn reads the conversation from the database. */
  invalidate(): void {
    this.cached = undefined;
    this.loading = undefined;
    this.uncertain = false;
  }

  /** One statement: the messages in order (ids follow that order), and the companions' changes. */
  private async insert(rows: Pending[], companions: Companion[]): Promise<{ id: number; version: string }[]> {
    const values = rows.map((row) => ({
      role: row.stored.role,
      content: row.stored,
      inbox_id: row.inboxId,
      search_text: searchText(row.stored),
    }));
    const parts = withParts(companions, 3);
    const result = await this.db.query<{ id: number; version: string }>(
      `${parts.sql}
       INSERT INTO messages (role, content, inbox_id, search_text, agent_id)
       SELECT e->>'role', e->'content', (e->>'inbox_id')::int, e->>'search_text', $2::int
       FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(e, n) ORDER BY n
       RETURNING id, id || ':' || xmin AS version`,
      [JSON.stringify(values), this.agentId, ...parts.params],
      { prepare: true },
    );
    const version = result.rows.at(-1)?.version;
    if (version) this.onWrite?.(Number(version.slice(version.indexOf(":") + 1)));
    return result.rows.sort((a, b) => a.id - b.id);
  }
}

export type { StoredMessage };
