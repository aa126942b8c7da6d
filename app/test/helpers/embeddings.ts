import type { Queryable } from "../../src/db/database.js";
import { createEmbeddingsClient, type EmbeddingsClient } from "../../src/embeddings/client.js";

/** A client of the fake embeddings server (`startFakeEmbeddings({ apiKey: "sk-test" })`), no prefixes. */
export function fakeEmbeddingsClient(baseUrl: string, model: string): EmbeddingsClient {
  return createEmbeddingsClient({ baseUrl, apiKey: "sk-test", model, queryPrefix: "", documentPrefix: "" });
}

/** A finished turn (an hour old) in a conversation: the person's words and the answer; the user message's id. */
export async function insertTurn(db: Queryable, user: string, answer: string, agentId = 1): Promise<number> {
  const at = "now() - interval '1 hour'";
  const said = await db.query<{ id: number }>(
    `INSERT INTO messages (role, content, search_text, agent_id, created_at) VALUES ('user', $1, $2, $3, ${at}) RETURNING id`,
    [JSON.stringify({ role: "user", content: user }), user, agentId],
  );
  await db.query(
    `INSERT INTO messages (role, content, search_text, agent_id, created_at) VALUES ('assistant', $1, $2, $3, ${at})`,
    [JSON.stringify({ role: "assistant", content: [{ type: "text", text: answer }] }), answer, agentId],
  );
  return said.rows[0]!.id;
}
