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
