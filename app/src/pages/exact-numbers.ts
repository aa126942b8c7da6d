import type { TextParsers } from "../db/database.js";

/**
 * Numbers in page query results: a value of a numeric type becomes a JSON number when that
 * number's JSON text denotes exactly the value PostgreSQL prints (`40.00` → 40, `12.50` → 12.5,
 * `0.1` → 0.1, an `int8` up to 2^53 → its number); otherwise it stays the string PostgreSQL
 * prints, so no digit is ever lost (`12345678901234567890.12`, `9007199254740993`, `NaN`,
 * `Infinity`). The same on both databases, whose drivers would otherwise differ.
 */
export function exactNumber(text: string): number | string {
  const number = Number(text);
  if (!Number.isFinite(number) || text.trim() === "") return text;
  const printed = decimalKey(text);
  return printed !== undefined && printed === decimalKey(String(number)) ? number : text;
}

/**
 * A decimal's value as `<sign><digits>e<point>`, with no leading or trailing zero digit, so two
 * spellings of one value compare equal ("12.50" and "1.25e1"); undefined when not a decimal.
 */
function decimalKey(text: string): string | undefined {
  const match = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text.trim());
  if (!match) return undefined;
  const [, sign, whole = "", fraction = "", exponent = "0"] = match;
  let digits = whole + fraction;
  let point = whole.length + Number(exponent);
  const leading = /^0*/.exec(digits)?.[0].length ?? 0;
  digits = digits.slice(leading).replace(/0+$/, "");
  point -= leading;
  if (digits === "") return "0";
  return `${sign === "-" ? "-" : ""}${digits}e${point}`;
}

/**
 * An array's text form (`{1.5,NULL,{2,3}}`, or `[0:1]={1,2}` with explicit bounds) as nested
 * arrays, each element read by `element`. Numbers are never quoted in it; quoted elements are
 * read anyway.
 */
export function parseArray<T>(text: string, element: (text: string) => T): unknown[] {
  let i = text.startsWith("[") ? text.indexOf("=") + 1 : 0;
  const list = (): unknown[] => {
    const items: unknown[] = [];
    i++; // "{"
    while (i < text.length && text[i] !== "}") {
      if (text[i] === "{") {
        items.push(list());
      } else if (text[i] === '"') {
        let value = "";
        for (i++; i < text.length && text[i] !== '"'; i++) {
          if (text[i] === "\\") i++;
          value += text[i] ?? "";
        }
        i++;
        items.push(element(value));
      } else {
        const end = text.slice(i).search(/[,}]/);
        const token = end === -1 ? text.slice(i) : text.slice(i, i + end);
        i += token.length;
        items.push(token === "NULL" ? null : element(token));
      }
      if (text[i] === ",") i++;
    }
    i++; // "}"
    return items;
  };
  return list();
}

const INT8 = 20;
const FLOAT4 = 700;
const FLOAT8 = 701;
const NUMERIC = 1700;
const INT8_ARRAY = 1016;
const FLOAT4_ARRAY = 1021;
const FLOAT8_ARRAY = 1022;
const NUMERIC_ARRAY = 1231;

const exactArray = (text: string): unknown[] => parseArray(text, exactNumber);

/**
 * The types whose values the drivers turn into strings, BigInts or rounded floats. `int2`, `int4`
 * and `oid` always fit and come back as numbers already; `money` stays text (it carries a
 * currency sign).
 */
export const EXACT_NUMBER_PARSERS: TextParsers = {
  [INT8]: exactNumber,
  [FLOAT4]: exactNumber,
  [FLOAT8]: exactNumber,
  [NUMERIC]: exactNumber,
  [INT8_ARRAY]: exactArray,
  [FLOAT4_ARRAY]: exactArray,
  [FLOAT8_ARRAY]: exactArray,
  [NUMERIC_ARRAY]: exactArray,
};
