import { DomainError } from "@stavrobot/common";
import type { Database } from "../db/database.js";
import { EXACT_NUMBER_PARSERS } from "./exact-numbers.js";

export const PAGE_QUERY_ROW_LIMIT = 1000;
export const PAGE_QUERY_TIMEOUT_MS = 5_000;

const invalid = (message: string): DomainError => new DomainError("invalid", message);

/** The database refused a checked query; its message is for the owner, not a public page's visitor. */
export class PageQueryFailed extends DomainError {
  constructor(readonly detail: string) {
    super("invalid", `Query failed: ${detail}`);
    this.name = "PageQueryFailed";
  }
}

/**
 * Checks that a page query is one read-only statement: it starts with SELECT or WITH, has no
 * comment (which could hide a second statement from a reader) and no `;` except one at the end,
 * looking past string literals, quoted identifiers and dollar quotes, none of which may hold a
 * `$param:name` (it would not be filled: PostgreSQL takes no parameter inside quotes). Returns the
 * statement without its trailing `;`, or throws an "invalid" DomainError saying what is wrong.
 */
export function checkPageQuery(sql: string): string {
  const text = sql.trim();
  if (!/^(SELECT|WITH)\b/i.test(text)) throw invalid("Only SELECT queries are allowed");
  let end = text.length;
  for (let i = 0; i < text.length; i++) {
    const char = text[i] as string;
    const next = text[i + 1];
    if (char === "'" && /[Ee]/.test(text[i - 1] ?? "") && !/[A-Za-z0-9_$]/.test(text[i - 2] ?? "")) {
      // E'...': backslash escapes, so \' does not end the literal.
      const close = endOfEscapeString(text, i);
      refuseQuotedParameter(text.slice(i + 1, close));
      i = close;
      continue;
    }
    if (char === "'" || char === '"') {
      const close = text.indexOf(char, i + 1);
      if (close === -1) throw invalid("Unterminated quote in the query");
      refuseQuotedParameter(text.slice(i + 1, close));
      i = close;
      // '' inside a literal is an escaped quote: the scan continues past it at the next round.
      continue;
    }
    if (char === "$") {
      const tag = /^\$[A-Za-z_]*\$/.exec(text.slice(i))?.[0];
      if (tag) {
        const close = text.indexOf(tag, i + tag.length);
        if (close === -1) throw invalid("Unterminated dollar quote in the query");
        refuseQuotedParameter(text.slice(i + tag.length, close));
        i = close + tag.length - 1;
        continue;
      }
    }
    if ((char === "-" && next === "-") || (char === "/" && next === "*")) {
      throw invalid("Comments are not allowed in page queries");
    }
    if (char === ";") {
      if (text.slice(i + 1).trim() !== "") throw invalid("Multiple SQL statements are not allowed");
      end = i;
      break;
    }
  }
  return text.slice(0, end).trim();
}

/** A placeholder inside quotes is text to PostgreSQL: the query would fail on every call. */
function refuseQuotedParameter(quoted: string): void {
  const name = /\$param:([A-Za-z_][A-Za-z0-9_]*)/.exec(quoted)?.[1];
  if (name === undefined) return;
  throw invalid(
    `$param:${name} is inside quotes, where it is not filled in: write it outside them, as a value ` +
      `of its own (e.g. \`WHERE title ILIKE '%' || $param:${name} || '%'\` instead of ` +
      `\`'%$param:${name}%'\`, or \`$param:${name}::date\` instead of \`'$param:${name}'\`)`,
  );
}

/** The index of the quote closing the E'...' literal opened at `open`. */
function endOfEscapeString(text: string, open: number): number {
  for (let i = open + 1; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === "'") {
      if (text[i + 1] !== "'") return i;
      i++;
    }
  }
  throw invalid("Unterminated quote in the query");
}

/**
 * `$param:name` placeholders, deduplicated in order of first appearance, become `$1..$n`, and the
 * values come from the request's query string (always bound, never spliced into the SQL).
 */
export function bindParameters(sql: string, values: URLSearchParams): { sql: string; params: string[] } {
  const names: string[] = [];
  const bound = sql.replace(/\$param:([A-Za-z_][A-Za-z0-9_]*)/g, (_match, name: string) => {
    let index = names.indexOf(name);
    if (index === -1) index = names.push(name) - 1;
    return `$${index + 1}`;
  });
  const params = names.map((name) => {
    const value = values.get(name);
    if (value === null) throw invalid(`Missing query parameter: ${name}`);
    return value;
  });
  return { sql: bound, params };
}

/**
 * Runs a checked page query read-only by construction: in a READ ONLY transaction (so no INSERT,
 * no writable CTE, no nextval, no function that writes), with a statement timeout, at most
 * PAGE_QUERY_ROW_LIMIT rows, and rolled back whatever happens.
 */
export async function runPageQuery(
  db: Database,
  sql: string,
  values: URLSearchParams,
): Promise<Record<string, unknown>[]> {
  const statement = checkPageQuery(sql);
  const { sql: bound, params } = bindParameters(statement, values);
  const rollback = new Error("read-only page query: always rolled back");
  let rows: Record<string, unknown>[] = [];
  try {
    await db.transaction(async (tx) => {
      await tx.query("SET TRANSACTION READ ONLY");
      await tx.query(`SET LOCAL statement_timeout = ${PAGE_QUERY_TIMEOUT_MS}`);
      // The limit is a bound parameter so the statement always has one: a query with parameters
      // goes over the extended protocol, which runs exactly one statement whatever the text holds
      // (with none, the simple protocol would run `…; COMMIT; DROP …` should the check be fooled).
      // Numbers as JSON numbers where that keeps their exact value (exact-numbers.ts).
      const result = await tx.query<Record<string, unknown>>(
        `SELECT * FROM (${bound}) AS page_query LIMIT $${params.length + 1}`,
        [...params, PAGE_QUERY_ROW_LIMIT],
        { parsers: EXACT_NUMBER_PARSERS },
      );
      rows = result.rows;
      throw rollback;
    });
  } catch (error) {
    if (error !== rollback) throw new PageQueryFailed((error as Error).message);
  }
  return rows;
}
