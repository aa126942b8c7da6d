import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import { encode } from "@toon-format/toon";
import type { Database, StatementResult } from "../db/database.js";
import { RESULT_LIMIT_BYTES, capText, textResult } from "./result.js";

const parameters = Type.Object({
  query: Type.String({ description: "One or more SQL statements, separated by semicolons." }),
});

/**
 * Runs SQL with the app's full database rights. Results are TOON (a compact table notation:
 * column names once, then one comma-separated line per row) and capped so one careless SELECT
 * cannot flood the context window.
 */
export function createExecuteSqlTool(deps: {
  db: Database;
  limitBytes?: number;
}): AgentTool<typeof parameters> {
  const limit = deps.limitBytes ?? RESULT_LIMIT_BYTES;
  return {
    name: "execute_sql",
    label: "Execute SQL",
    description:
      "Run SQL on your PostgreSQL database (read and write). Large results are truncated: use LIMIT " +
      "and select only the columns you need.",
    parameters,
    async execute(_id, params) {
      // SQL errors are thrown: the model sees them as a failed tool call and can fix the query.
      const results = await deps.db.executeScript(params.query);
      return textResult(formatResults(results, limit));
    },
  };
}

export function formatResults(results: StatementResult[], limitBytes: number): string {
  const parts = results.map((result) => {
    if (result.columns.length === 0) {
      return encode({ command: result.command ?? "OK", rowCount: result.rowCount });
    }
    if (result.rows.length === 0) return `(no rows; columns: ${result.columns.join(", ")})`;
    return encode({ rows: result.rows.map(plain) }, { indent: 2, delimiter: "," });
  });
  return capText(
    parts.join("\n\n") || "OK",
    limitBytes,
    "Use LIMIT/OFFSET or fewer columns to see the rest.",
  );
}

/** Dates and byte arrays become text so every value has a compact, readable form. */
function plain(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    if (value instanceof Date) out[key] = value.toISOString();
    else if (value instanceof Uint8Array) out[key] = `<${value.length} bytes>`;
    else if (typeof value === "bigint") out[key] = value.toString();
    else out[key] = value;
  }
  return out;
}
