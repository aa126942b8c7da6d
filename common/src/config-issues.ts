import type { z } from "zod";

/**
 * A config problem in the words of the file a person edits: the key, what to write there, and
 * for an unknown key the setting it most likely meant. The validator's own codes and phrases
 * ("invalid_type", "expected string, received undefined") never reach the person.
 */
export function describeConfigIssue(issue: z.core.$ZodIssue, schema: z.ZodType): string {
  const path = issue.path.map(String);
  const key = path.join(".");
  switch (issue.code) {
    case "unrecognized_keys":
      return issue.keys.map((name) => unknownKey([...path, name], knownKeys(schema, path))).join("; ");
    case "invalid_type": {
      const wanted = describeType(issue.expected);
      if (issue.input === undefined) return `key "${key}" is missing: add ${leaf(path)} = ${wanted.example}`;
      const found =
        issue.expected === "int" && typeof issue.input === "number" && Number.isFinite(issue.input)
          ? "a number with a fraction"
          : describeValue(issue.input);
      return `key "${key}" must be ${wanted.noun}, e.g. ${leaf(path)} = ${wanted.example} (it is ${found})`;
    }
    case "invalid_value": {
      const choices = issue.values.map((value) => JSON.stringify(value));
      const near =
        typeof issue.input === "string" ? closest(issue.input, issue.values.map(String)) : undefined;
      // A choice from a fixed list is never a secret, so the value written may be shown.
      const written =
        typeof issue.input === "string" ? `"${issue.input.slice(0, 40)}"` : describeValue(issue.input);
      return (
        `key "${key}" must be one of ${choices.join(", ")} (it is ${written})` +
        (near ? `; did you mean "${near}"?` : "")
      );
    }
    case "too_small":
    case "too_big":
      return `key "${key}" ${ownWords(issue.message) ?? sizeWords(issue)}`;
    case "invalid_format":
      return `key "${key}" ${ownWords(issue.message) ?? formatWords(issue.format)}`;
    case "invalid_union":
      return `key "${key}" ${ownWords(issue.message) ?? "is not in a form this key accepts (see config.example.toml)"}`;
    default: {
      const words = ownWords(issue.message) ?? "is not valid here (see config.example.toml)";
      return key ? `key "${key}": ${words}` : words;
    }
  }
}

/** A message the schema's author wrote for people, or undefined for the validator's stock one. */
function ownWords(message: string): string | undefined {
  return /^(Invalid|Too (small|big)|Unrecognized|Expected|expected)\b/.test(message) ? undefined : message;
}

function leaf(path: readonly string[]): string {
  return path[path.length - 1] ?? "value";
}

function unknownKey(path: readonly string[], known: readonly string[]): string {
  const name = leaf(path);
  const near = closest(name, known);
  const where = path.length > 1 ? ` in [${path.slice(0, -1).join(".")}]` : "";
  return (
    `key "${path.join(".")}" is not a setting${where}` +
    (near ? `: did you mean "${near}"?` : known.length > 0 ? `; the settings here are ${list(known)}` : "")
  );
}

function list(keys: readonly string[]): string {
  const shown = keys.slice(0, 12).map((key) => `"${key}"`);
  return shown.join(", ") + (keys.length > 12 ? ` and ${keys.length - 12} more` : "");
}

interface Wanted {
  noun: string;
  example: string;
}

function describeType(expected: string): Wanted {
  switch (expected) {
    case "string":
      return { noun: "text in quotes", example: '"…"' };
    case "number":
      return { noun: "a number", example: "30" };
    case "int":
      return { noun: "a whole number", example: "30" };
    case "boolean":
      return { noun: "true or false", example: "true" };
    case "array":
      return { noun: "a list", example: '["…"]' };
    case "object":
    case "record":
      return { noun: "a table (a [section] or { key = value, … })", example: "{ … }" };
    default:
      return { noun: `a value of type ${expected}`, example: "…" };
  }
}

/** What kind of value was written, never the value itself (it may be a key or a password). */
function describeValue(input: unknown): string {
  if (input === undefined) return "missing";
  if (typeof input === "string") return "text";
  if (typeof input === "number") return Number.isFinite(input) ? "a number" : "not a usable number";
  if (typeof input === "boolean") return input ? "true" : "false";
  if (Array.isArray(input)) return "a list";
  if (input instanceof Date) return "a date";
  if (typeof input === "object" && input !== null) return "a table";
  return typeof input;
}

function sizeWords(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig): string {
  const small = issue.code === "too_small";
  const bound = Number(
    small ? (issue as z.core.$ZodIssueTooSmall).minimum : (issue as z.core.$ZodIssueTooBig).maximum,
  );
  const inclusive = issue.inclusive !== false;
  switch (issue.origin) {
    case "string":
      if (small && bound <= 1) return "must not be empty";
      return `must be ${small ? "at least" : "at most"} ${bound} characters long`;
    case "array":
    case "set":
      return `must have ${small ? "at least" : "at most"} ${bound} entr${bound === 1 ? "y" : "ies"}`;
    default:
      if (small) return inclusive ? `must be ${bound} or more` : `must be more than ${bound}`;
      return inclusive ? `must be ${bound} or less` : `must be less than ${bound}`;
  }
}

function formatWords(format: string): string {
  switch (format) {
    case "url":
      return 'must be a web address, e.g. "https://example.com"';
    case "email":
      return 'must be an email address, e.g. "someone@example.com"';
    case "regex":
      return "is not in the expected form (see config.example.toml)";
    default:
      return `must be ${format === "datetime" ? "a date and time" : `in ${format} form`}`;
  }
}

/** The known key nearest to `name` (a typo or a different case), if one is close enough. */
export function closest(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: { key: string; distance: number } | undefined;
  for (const key of known) {
    const other = key.toLowerCase();
    // A shortened key ("timeout" for "timeoutSeconds") counts as one slip.
    const shortened = lower.length >= 4 && (other.startsWith(lower) || lower.startsWith(other));
    const distance = other === lower ? 0 : shortened ? 1 : editDistance(lower, other);
    if (!best || distance < best.distance) best = { key, distance };
  }
  if (!best) return undefined;
  return best.distance <= Math.max(1, Math.floor(Math.max(name.length, best.key.length) / 3))
    ? best.key
    : undefined;
}

/**
 * Edit distance: the fewest insertions, deletions, substitutions and swaps of two neighbouring
 * letters from `a` to `b` (a swap is the commonest typo: "modle" for "model").
 */
export function editDistance(a: string, b: string): number {
  // d[i][j]: the distance between the first i letters of a and the first j of b.
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      let best = Math.min(
        at(i - 1, j) + 1,
        at(i, j - 1) + 1,
        at(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = best;
    }
  }
  return at(a.length, b.length);
}

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
  valueType?: z.ZodType;
  options?: z.ZodType[];
}

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

/** The keys an object schema accepts at `path`, found by walking the schema. */
export function knownKeys(schema: z.ZodType, path: readonly string[]): string[] {
  const found = objectAt(schema, path);
  return found ? Object.keys(defOf(found).shape ?? {}) : [];
}

function objectAt(schema: z.ZodType, path: readonly string[]): z.ZodType | undefined {
  const def = defOf(schema);
  if (def.innerType) return objectAt(def.innerType, path);
  if (def.type === "pipe" && def.in) return objectAt(def.in, path);
  if (def.type === "union" && def.options) {
    for (const option of def.options) {
      const found = objectAt(option, path);
      if (found) return found;
    }
    return undefined;
  }
  const [head, ...rest] = path;
  if (head === undefined) return def.type === "object" ? schema : undefined;
  if (def.type === "object" && def.shape?.[head]) return objectAt(def.shape[head], rest);
  if (def.type === "array" && def.element) return objectAt(def.element, rest);
  if (def.type === "record" && def.valueType) return objectAt(def.valueType, rest);
  return undefined;
}
