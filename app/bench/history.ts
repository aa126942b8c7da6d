/**
 * A year of use, as the database would hold it: `count` messages (user questions, assistant
 * answers, now and then a tool call and its result) spread over twelve months, with a compaction
 * every `compactEvery` messages, as the app writes them. Generated in SQL, in batches.
 */
import type { Queryable } from "../src/db/database.js";

const WORDS =
  "garden tomato invoice meeting train Berlin dentist birthday recipe budget laptop insurance " +
  "holiday passport plumber physics novel marathon coffee library contract pension lease";

/** How often the filled history has a compaction (in messages); the newest `COMPACT_EVERY` are the conversation. */
export const COMPACT_EVERY = 400;

export async function fillHistory(
  db: Queryable,
  options: { count: number; compactEvery?: number; batch?: number },
): Promise<void> {
  const compactEvery = options.compactEvery ?? COMPACT_EVERY;
  const batch = options.batch ?? 50_000;
  const words = WORDS.split(" ");
  const start = Date.now() - 365 * 24 * 3600_000;
  const step = (365 * 24 * 3600_000) / options.count;
  for (let from = 0; from < options.count; from += batch) {
    const to = Math.min(options.count, from + batch);
    // Four-message rhythm: question, tool call, tool result, answer.
    await db.query(
      `INSERT INTO messages (role, content, created_at, search_text)
       SELECT CASE n % 4 WHEN 0 THEN 'user' WHEN 3 THEN 'assistant' WHEN 1 THEN 'assistant' ELSE 'toolResult' END,
              CASE n % 4
                WHEN 0 THEN jsonb_build_object('role', 'user', 'timestamp', ts_ms, 'content',
                  jsonb_build_array(jsonb_build_object('type', 'text', 'text',
                    'Time: ' || to_char(ts, 'Dy YYYY-MM-DD HH24:MI:SS') || E'\\nSource: cli\\nSender: owner\\nText: ' || body)))
                WHEN 1 THEN jsonb_build_object('role', 'assistant', 'timestamp', ts_ms, 'api', 'anthropic-messages',
                  'provider', 'anthropic', 'model', 'claude-sonnet-4-5', 'stopReason', 'toolUse',
                  'usage', jsonb_build_object('input', 900, 'output', 40, 'cacheRead', 8000, 'cacheWrite', 0, 'totalTokens', 8940),
                  'content', jsonb_build_array(jsonb_build_object('type', 'toolCall', 'id', 'toolu_' || n,
                    'name', 'execute_sql', 'arguments', jsonb_build_object('query', 'SELECT * FROM notes WHERE topic = ''' || w1 || ''''))))
                WHEN 2 THEN jsonb_build_object('role', 'toolResult', 'timestamp', ts_ms, 'toolCallId', 'toolu_' || (n - 1),
                  'toolName', 'execute_sql', 'isError', false,
                  'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'rows[1]{topic,note}:' || E'\\n  ' || w1 || ',' || body)))
                ELSE jsonb_build_object('role', 'assistant', 'timestamp', ts_ms, 'api', 'anthropic-messages',
                  'provider', 'anthropic', 'model', 'claude-sonnet-4-5', 'stopReason', 'stop',
                  'usage', jsonb_build_object('input', 950, 'output', 120, 'cacheRead', 8000, 'cacheWrite', 0, 'totalTokens', 9070),
                  'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'About the ' || w1 || ': ' || body || ' I noted it.')))
              END,
              ts,
              CASE WHEN n % 4 IN (0, 3) THEN body END
       FROM (
         SELECT n, to_timestamp(($3::double precision + n * $4::double precision) / 1000) AS ts,
                ($3::bigint + (n * $4::double precision)::bigint) AS ts_ms,
                ($5::text[])[1 + n % 23] AS w1,
                'the ' || ($5::text[])[1 + n % 23] || ' and the ' || ($5::text[])[1 + (n * 7) % 23] ||
                  ' need attention before ' || ($5::text[])[1 + (n * 13) % 23] || ' number ' || n AS body
         FROM generate_series($1::int, $2::int - 1) AS n
       ) AS generated`,
      [from, to, start, step, words],
    );
  }
  // A compaction every `compactEvery` messages (at the end of a turn), each covering everything
  // before its boundary; the newest `compactEvery / 2` messages are not compacted yet.
  await db.query(
    `INSERT INTO compactions (summary, up_to_message_id, created_at)
     SELECT 'Summary of the conversation up to message ' || id || ': the owner tracked ' ||
            'their garden, invoices and travel; open items were noted in the scratchpad.', id, created_at
     FROM messages
     WHERE id % $1 = 0 AND id <= (SELECT max(id) FROM messages) - $1 / 2
     ORDER BY id`,
    [compactEvery],
  );
}
