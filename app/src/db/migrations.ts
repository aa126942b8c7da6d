import type { Database } from "./database.js";

interface Migration {
  version: number;
  name: string;
  sql: string;
}

/**
 * Versioned schema changes, applied in order, each in its own transaction. Never edit a
 * migration that has shipped: add a new one.
 */
export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: "initial schema",
    sql: `
      -- Every accepted /chat message, written before it is acknowledged, so nothing is lost on a crash.
      CREATE TABLE inbox (
        id SERIAL PRIMARY KEY,
        received_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        source TEXT,
        sender TEXT,
        payload JSONB NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
          CHECK (status IN ('pending', 'processing', 'steered', 'done', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        response TEXT,
        error TEXT,
        delivered BOOLEAN NOT NULL DEFAULT false,
        finished_at TIMESTAMPTZ
      );
      CREATE INDEX inbox_open ON inbox (id) WHERE status IN ('pending', 'processing', 'steered');

      CREATE TABLE messages (
        id SERIAL PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'toolResult')),
        content JSONB NOT NULL,
        inbox_id INTEGER REFERENCES inbox (id) ON DELETE SET NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE INDEX messages_inbox ON messages (inbox_id);

      CREATE TABLE memories (
        id SERIAL PRIMARY KEY,
        content TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );

      CREATE TABLE scratchpad (
        id SERIAL PRIMARY KEY,
        title TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );

      CREATE TABLE compactions (
        id SERIAL PRIMARY KEY,
        summary TEXT NOT NULL CHECK (length(btrim(summary)) > 0),
        up_to_message_id INTEGER NOT NULL REFERENCES messages (id),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );

      CREATE TABLE cron_entries (
        id SERIAL PRIMARY KEY,
        cron_expression TEXT,
        fire_at TIMESTAMPTZ,
        note TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        CHECK ((cron_expression IS NULL) <> (fire_at IS NULL))
      );

      CREATE TABLE pages (
        id SERIAL PRIMARY KEY,
        path TEXT NOT NULL,
        version INTEGER NOT NULL DEFAULT 1,
        mimetype TEXT NOT NULL,
        data BYTEA NOT NULL,
        is_public BOOLEAN NOT NULL DEFAULT false,
        queries JSONB,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        UNIQUE (path, version)
      );
    `,
  },
  {
    version: 2,
    name: "inbox idempotency keys",
    sql: `
      -- Senders that retry deliveries (the plugin-runner outbox) send a key; a repeat is not run twice.
      ALTER TABLE inbox ADD COLUMN idempotency_key TEXT;
      CREATE UNIQUE INDEX inbox_idempotency_key ON inbox (idempotency_key) WHERE idempotency_key IS NOT NULL;
    `,
  },
  {
    version: 3,
    name: "scheduler, search, deliveries, allowlists and usage",
    sql: `
      -- The scheduled time a recurring entry last fired for: written in the same transaction as
      -- the message it enqueues, so a crash can never make one scheduled time fire twice.
      ALTER TABLE cron_entries ADD COLUMN last_fired_for TIMESTAMPTZ;
      ALTER TABLE cron_entries ADD COLUMN updated_at TIMESTAMPTZ NOT NULL DEFAULT now();

      -- Text of user and assistant messages, for full-text search (db_search), indexed.
      ALTER TABLE messages ADD COLUMN search_text TEXT;
      UPDATE messages SET search_text = (
        SELECT string_agg(part, E'\n') FROM (
          SELECT content->>'content' AS part WHERE jsonb_typeof(content->'content') = 'string'
          UNION ALL
          SELECT block->>'text' FROM jsonb_array_elements(
            CASE WHEN jsonb_typeof(content->'content') = 'array' THEN content->'content' ELSE '[]'::jsonb END
          ) AS block WHERE block->>'type' = 'text'
        ) AS parts
      ) WHERE role IN ('user', 'assistant');
      CREATE INDEX messages_search ON messages USING gin (to_tsvector('english', coalesce(search_text, '')));

      CREATE INDEX pages_latest ON pages (path, version DESC);

      -- Every outgoing message to a channel (Telegram, Signal): written before it is sent,
      -- retried with backoff, sent once (the idempotency key is unique).
      CREATE TABLE deliveries (
        id SERIAL PRIMARY KEY,
        channel TEXT NOT NULL,
        recipient TEXT NOT NULL,
        payload JSONB NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        last_error TEXT,
        inbox_id INTEGER REFERENCES inbox (id) ON DELETE SET NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        sent_at TIMESTAMPTZ
      );
      CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';

      -- Who may talk to the assistant on each channel besides the owner (the owner's settings).
      CREATE TABLE allowlist (
        service TEXT NOT NULL,
        identifier TEXT NOT NULL,
        note TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (service, identifier)
      );

      -- What each model call cost, for the usage page and the budgets.
      CREATE TABLE usage (
        id SERIAL PRIMARY KEY,
        at TIMESTAMPTZ NOT NULL DEFAULT now(),
        kind TEXT NOT NULL,
        source TEXT,
        plugin TEXT,
        inbox_id INTEGER REFERENCES inbox (id) ON DELETE SET NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0
      );
      CREATE INDEX usage_at ON usage (at);

      -- Two maintenance entries, seeded once; the owner (or the assistant) may edit or delete them.
      INSERT INTO cron_entries (cron_expression, note) VALUES
        ('0 3 * * *', '[nightly-review] Look back over the last day of conversation and tool results. Record what is worth remembering with manage_knowledge, merge or drop memories that are stale or duplicated, and put open promises and tasks in the scratchpad. Do not message anyone unless something needs the owner''s attention before morning.'),
        ('0 4 * * *', '[daily-maintenance] Check that the scheduled entries still make sense (manage_cron list), remove notes and scratchpad entries that are done, keep scratchpad titles accurate, and look for tables you created that keep data nobody needs. Tell the owner only about what needs their decision.');
    `,
  },
  {
    version: 4,
    name: "signed allowlist entries and app state",
    sql: `
      -- An HMAC over (service, identifier) keyed by a secret the model never sees: entries the
      -- model inserts with execute_sql have none, and are ignored.
      ALTER TABLE allowlist ADD COLUMN signature TEXT NOT NULL DEFAULT '';

      -- Small facts the app keeps about itself (e.g. that the legacy allowlists were imported).
      CREATE TABLE app_state (
        key TEXT PRIMARY KEY,
        value JSONB NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );

      -- Finished replies not yet seen by the owner, looked up at every console reply.
      CREATE INDEX inbox_undelivered ON inbox (id) WHERE NOT delivered AND status IN ('done', 'failed');
    `,
  },
  {
    version: 5,
    name: "an inbox entry's outcome in a column, and its answer's flag named seen",
    sql: `
      -- Whether the answer reached its audience: a console's owner saw it, or it went to its channel.
      ALTER TABLE inbox RENAME COLUMN delivered TO seen;
      ALTER INDEX inbox_undelivered RENAME TO inbox_unseen;

      -- How a finished entry ended, so nothing reads it back from the reply's words.
      ALTER TABLE inbox ADD COLUMN outcome TEXT
        CHECK (outcome IN ('reply', 'empty', 'aborted', 'error', 'steered', 'notice'));
      -- Entries finished before this column, told apart by the texts the queue wrote then.
      UPDATE inbox SET outcome = CASE
          WHEN status = 'failed' THEN 'error'
          WHEN response = 'Aborted.' THEN 'aborted'
          WHEN response = '(The assistant finished without a text reply.)' THEN 'empty'
          WHEN response = 'Message received, steering the current request.' THEN 'steered'
          ELSE 'reply'
        END
        WHERE status IN ('done', 'failed');

      -- Files a channel's message named, still to fetch: each kept with the channel it is on.
      UPDATE inbox SET payload = jsonb_set(payload, '{media}', (
          SELECT coalesce(jsonb_agg(jsonb_build_object('channel', 'telegram', 'ref', ref)), '[]'::jsonb)
          FROM jsonb_array_elements(payload->'media') AS ref))
        WHERE jsonb_typeof(payload->'media') = 'array';
    `,
  },
  {
    version: 6,
    name: "agents, interlocutors and their identities; each conversation its agent's",
    sql: `
      -- The main agent (the owner's, id 1) and subagents, each with its own conversation, prompt
      -- and whitelists: allowed_tools (bare names or tool.action), allowed_plugins (*, plugin,
      -- plugin.tool).
      CREATE TABLE agents (
        id SERIAL PRIMARY KEY,
        name TEXT NOT NULL,
        system_prompt TEXT NOT NULL DEFAULT '',
        allowed_tools TEXT[] NOT NULL DEFAULT '{}',
        allowed_plugins TEXT[] NOT NULL DEFAULT '{}',
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      INSERT INTO agents (id, name, allowed_tools, allowed_plugins) VALUES (1, 'main', '{*}', '{*}');
      SELECT setval('agents_id_seq', 1);

      -- People the assistant talks to (the owner is one, seeded from [owner] at every start),
      -- each handled by one agent; the allowlist stays the first gate, this record the second.
      CREATE TABLE interlocutors (
        id SERIAL PRIMARY KEY,
        display_name TEXT NOT NULL UNIQUE,
        owner BOOLEAN NOT NULL DEFAULT false,
        enabled BOOLEAN NOT NULL DEFAULT true,
        agent_id INTEGER REFERENCES agents (id),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE UNIQUE INDEX interlocutors_one_owner ON interlocutors (owner) WHERE owner;

      -- A way to reach a person on one service; a removed identity keeps its row with no identifier.
      CREATE TABLE interlocutor_identities (
        id SERIAL PRIMARY KEY,
        interlocutor_id INTEGER NOT NULL REFERENCES interlocutors (id) ON DELETE CASCADE,
        service TEXT NOT NULL,
        identifier TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE UNIQUE INDEX interlocutor_identities_live ON interlocutor_identities (service, identifier)
        WHERE identifier IS NOT NULL;

      -- Every message and summary belongs to one agent's conversation; what exists is the main agent's.
      ALTER TABLE messages ADD COLUMN agent_id INTEGER NOT NULL DEFAULT 1 REFERENCES agents (id);
      CREATE INDEX messages_agent ON messages (agent_id, id);
      ALTER TABLE compactions ADD COLUMN agent_id INTEGER NOT NULL DEFAULT 1 REFERENCES agents (id);
      CREATE INDEX compactions_agent ON compactions (agent_id, id);
    `,
  },
  {
    version: 7,
    name: "one name for the terminal's messages, and each cron firing named by its entry",
    sql: `
      -- The owner's terminal was stored as no source and shown as 'console' (Home) and 'turn'
      -- (Usage); it is 'cli' everywhere now, as the CLI itself sends.
      UPDATE inbox SET source = 'cli' WHERE source IS NULL;
      -- A firing names its entry ('cron:<id>'), read back from the text the scheduler wrote.
      UPDATE inbox
        SET source = 'cron:' || substring(payload->>'message' from '^\\[Cron entry ([0-9]+) has fired\\]')
        WHERE source = 'cron' AND payload->>'message' ~ '^\\[Cron entry [0-9]+ has fired\\]';
      -- A turn's usage rows carry its source (compaction's have no turn, and keep none).
      UPDATE usage SET source = inbox.source FROM inbox
        WHERE usage.inbox_id = inbox.id AND inbox.source IS NOT NULL
          AND (usage.source IS NULL OR usage.source = 'cron');
    `,
  },
  {
    version: 8,
    name: "notifications the owner dismisses",
    sql: `
      -- An answer kept for the owner (a reminder, a plugin's result, a notice), listed on every
      -- page until the owner dismisses it; its title is in the owner's words (a reminder's note).
      CREATE TABLE notifications (
        inbox_id INTEGER PRIMARY KEY REFERENCES inbox (id) ON DELETE CASCADE,
        title TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        dismissed_at TIMESTAMPTZ
      );
      CREATE INDEX notifications_open ON notifications (inbox_id) WHERE dismissed_at IS NULL;
    `,
  },
  {
    version: 9,
    name: "an owner's message its channel cannot deliver is kept for their consoles",
    sql: `
      -- A message to the owner that its channel could not deliver is also kept for the owner's
      -- consoles, as a notice (kept_inbox_id); once a console has shown that notice, the message
      -- is withdrawn from the channel ('withdrawn') instead of arriving there too, later.
      ALTER TABLE deliveries ADD COLUMN kept_inbox_id INTEGER REFERENCES inbox (id) ON DELETE SET NULL;
      -- The last failure said the channel itself is down (its service, its program), not just busy.
      ALTER TABLE deliveries ADD COLUMN channel_down BOOLEAN NOT NULL DEFAULT false;
      -- Since when it has been failing (its first failed attempt).
      ALTER TABLE deliveries ADD COLUMN failing_since TIMESTAMPTZ;
      ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
      ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
        CHECK (status IN ('pending', 'sent', 'failed', 'withdrawn'));
    `,
  },
  {
    version: 10,
    name: "embedding chunks for search by meaning",
    sql: `
      -- What db_search finds by meaning: a turn (a user message and its answer), a memory, a
      -- scratchpad entry or a compaction summary, as text with a short header, and its vector
      -- under one identity (provider:model:dimensions). Vectors of two identities are never
      -- compared; a new identity's rows are built beside the old ones, then replace them.
      -- status: pending (waiting), ok (embedding set), empty (no text to embed), rejected (the
      -- provider refused it; last_error says why). A row is never given a zero vector.
      CREATE TABLE embedding_chunks (
        id SERIAL PRIMARY KEY,
        identity TEXT NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('turn', 'memory', 'scratchpad', 'compaction')),
        source_id INTEGER NOT NULL,
        agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
        source_at TIMESTAMPTZ NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'ok', 'empty', 'rejected')),
        embedding REAL[],
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        last_error TEXT,
        embedded_at TIMESTAMPTZ,
        UNIQUE (identity, source, source_id),
        CHECK ((status = 'ok') = (embedding IS NOT NULL))
      );
      CREATE INDEX embedding_chunks_due ON embedding_chunks (identity, next_attempt_at, id) WHERE status = 'pending';
      CREATE INDEX embedding_chunks_scope ON embedding_chunks (identity, agent_id, source_at DESC) WHERE status = 'ok';
      CREATE INDEX embedding_chunks_search ON embedding_chunks USING gin (to_tsvector('english', content));
    `,
  },
  {
    version: 11,
    name: "calls that wait for the owner's approval",
    sql: `
      -- A call the trust gate stopped (a turn holding outside text wanted to act): it waits for the
      -- owner, who approves it once or denies it. signature: an HMAC of (agent, tool, arguments)
      -- keyed by the internal secret, so a row the model writes or changes runs nothing.
      CREATE TABLE approvals (
        id SERIAL PRIMARY KEY,
        agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
        inbox_id INTEGER REFERENCES inbox (id) ON DELETE SET NULL,
        tool TEXT NOT NULL,
        args JSONB NOT NULL,
        asked_by TEXT NOT NULL,
        reply_to JSONB,
        signature TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied', 'done')),
        result TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        decided_at TIMESTAMPTZ
      );
      CREATE INDEX approvals_pending ON approvals (id) WHERE status = 'pending';
    `,
  },
  {
    version: 12,
    name: "email: mailbox cursors, mails seen, threads and the waiting list",
    sql: `
      -- Where reading a mailbox by IMAP got to: its UIDVALIDITY and the last UID handled. A new
      -- UIDVALIDITY means the UIDs were renumbered: the mailbox is read again from updated_at on,
      -- and email_seen keeps what was handled from being handled twice.
      CREATE TABLE email_cursors (
        mailbox TEXT PRIMARY KEY,
        uid_validity BIGINT NOT NULL,
        last_uid BIGINT NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      -- Every mail handled (by IMAP or the webhook), by Message-ID (or a hash of the mail without one).
      CREATE TABLE email_seen (
        message_id TEXT PRIMARY KEY,
        seen_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      -- The last mail from each address, so the answer to it goes into the same thread.
      CREATE TABLE email_threads (
        address TEXT PRIMARY KEY,
        message_id TEXT NOT NULL,
        refs TEXT NOT NULL DEFAULT '',
        subject TEXT NOT NULL,
        received_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      -- Mail from the owner's or an allowed address that did not prove its sender: it waits for
      -- the owner, who lets it through once, always (a signed entry), or dismisses it.
      CREATE TABLE email_waiting (
        id SERIAL PRIMARY KEY,
        message_id TEXT NOT NULL UNIQUE,
        sender TEXT NOT NULL,
        subject TEXT NOT NULL,
        reason TEXT NOT NULL,
        raw BYTEA NOT NULL,
        received_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        status TEXT NOT NULL DEFAULT 'waiting' CHECK (status IN ('waiting', 'let-through', 'dismissed'))
      );
      -- Addresses the owner lets through without proof ("always"), each signed with a key the
      -- model never sees, as allowlist entries are: a row the model writes is ignored.
      CREATE TABLE email_unproven_allowed (
        address TEXT PRIMARY KEY,
        signature TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 13,
    name: "where notes, reminders and summaries written after outside text came from; chunks' words stored; pages indexed",
    sql: `
      -- Written in a turn that held outside text (trust/gate.ts): where that text came from
      -- ("web_fetch, plugin:mail/check"). A note or a summary keeps it, so what entered from
      -- outside stays outside when it is read back in a later turn.
      ALTER TABLE memories ADD COLUMN provenance TEXT;
      ALTER TABLE scratchpad ADD COLUMN provenance TEXT;
      ALTER TABLE compactions ADD COLUMN provenance TEXT;
      -- A reminder set after outside text: its firing turn holds that text again.
      ALTER TABLE cron_entries ADD COLUMN provenance TEXT;
      -- The chunks' words stored once, not computed again for each search's ranking.
      ALTER TABLE embedding_chunks
        ADD COLUMN words tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED;
      DROP INDEX embedding_chunks_search;
      CREATE INDEX embedding_chunks_words ON embedding_chunks USING gin (words);
      -- The text of the pages the assistant published is indexed too.
      ALTER TABLE embedding_chunks DROP CONSTRAINT embedding_chunks_source_check;
      ALTER TABLE embedding_chunks ADD CONSTRAINT embedding_chunks_source_check
        CHECK (source IN ('turn', 'memory', 'scratchpad', 'compaction', 'page'));
    `,
  },
  {
    version: 14,
    name: "skills the owner installs, and which version of each they approved",
    sql: `
      -- One row per installed skill (its files are in the data directory's skills/<name>/). A skill
      -- is shown to the model only when the hash the owner approved is its content's hash and the
      -- row's signature (a key the model never sees, over the name, that hash, the description and
      -- whether it is enabled) holds: a row the model writes with SQL shows nothing.
      CREATE TABLE installed_skills (
        name TEXT PRIMARY KEY,
        description TEXT NOT NULL,
        format TEXT NOT NULL CHECK (format IN ('agent-skills', 'skill-page')),
        source TEXT NOT NULL,
        version TEXT,
        author TEXT,
        content_hash TEXT NOT NULL,
        installed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        approved_hash TEXT,
        approved_version TEXT,
        approved_at TIMESTAMPTZ,
        enabled BOOLEAN NOT NULL DEFAULT true,
        signature TEXT NOT NULL DEFAULT ''
      );
    `,
  },
];

/** Applies pending migrations; safe to call on every start and from several processes. */
export async function migrate(db: Database): Promise<number> {
  await db.query(`CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
  )`);
  let applied = 0;
  for (const migration of migrations) {
    const done = await db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock(727274)");
      const existing = await tx.query("SELECT 1 FROM schema_version WHERE version = $1", [migration.version]);
      if (existing.rows.length > 0) return false;
      await tx.exec(migration.sql);
      await tx.query("INSERT INTO schema_version (version, name) VALUES ($1, $2)", [
        migration.version,
        migration.name,
      ]);
      return true;
    });
    if (done) applied++;
  }
  return applied;
}
