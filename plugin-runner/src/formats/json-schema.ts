import type { Ajv, Options, ValidateFunction } from "ajv";
import { DomainError } from "@stavrobot/common";
import type { ValidatedParams } from "../validate.js";
import type { JsonSchema } from "./format.js";

/**
 * Parameters checked against the JSON Schema a tool declared, with ajv (see DECISIONLOG.md).
 * The schema is the plugin author's, so before it is compiled the keywords that run a regular
 * expression (`pattern`, `patternProperties`) are taken out: a hostile expression could otherwise
 * hold the runner's one thread (the plugin can still check them itself). `format` is not checked.
 * A schema ajv cannot compile (a remote `$ref`, a wrong keyword) checks nothing, as the format's
 * own host would not have either; such a tool still runs.
 */
let ajv: Promise<Ajv> | undefined;
const compiled = new WeakMap<JsonSchema, ValidateFunction | null>();

/**
 * ajv is loaded when a tool with a JSON Schema first runs: ~8 MB of the runner a plugin of our own
 * format never needs. ajv is CommonJS: its class is taken from the module's `default` (its
 * `module.exports`), the one export Node and the bundle's chunk both give a dynamic import; the
 * named export exists only where a loader guesses it (the test loader did, the bundle does not).
 */
function loadAjv(): Promise<Ajv> {
  ajv ??= import("ajv").then(({ default: exported }) => {
    const { Ajv } = exported as unknown as { Ajv: new (options: Options) => Ajv };
    return new Ajv({ strict: false, allErrors: true, validateFormats: false, validateSchema: false });
  });
  return ajv;
}

export async function validateAgainstSchema(
  schema: JsonSchema | undefined,
  input: Record<string, unknown>,
): Promise<ValidatedParams> {
  const problems = schema ? await schemaProblems(schema, input, "(parameters)") : undefined;
  if (problems) throw new DomainError("invalid", `Invalid parameters: ${problems}`, { schema });
  return { values: input, files: [] };
}

/**
 * What in `value` the schema refuses (at most ten problems, `/path message; …`), or undefined when
 * it passes or the schema does not compile. `whole` names the value itself in a problem.
 */
export async function schemaProblems(
  schema: JsonSchema,
  value: unknown,
  whole = "(the value)",
): Promise<string | undefined> {
  const validate = validatorFor(schema, await loadAjv());
  if (!validate || validate(value)) return undefined;
  const problems = (validate.errors ?? [])
    .slice(0, 10)
    .map((error) => `${error.instancePath || whole} ${error.message ?? "is invalid"}`.trim());
  return [...new Set(problems)].join("; ");
}

function validatorFor(schema: JsonSchema, ajv: Ajv): ValidateFunction | null {
  const known = compiled.get(schema);
  if (known !== undefined) return known;
  let validate: ValidateFunction | null;
  try {
    validate = ajv.compile(withoutRegexes(schema) as object);
  } catch {
    validate = null;
  }
  compiled.set(schema, validate);
  return validate;
}

/** Keywords whose value is one subschema, a list of them, or a map of them. */
const ONE = [
  "additionalProperties",
  "items",
  "not",
  "if",
  "then",
  "else",
  "contains",
  "propertyNames",
  "additionalItems",
  "unevaluatedProperties",
  "unevaluatedItems",
];
const LIST = ["anyOf", "oneOf", "allOf", "prefixItems", "items"];
const MAP = ["properties", "definitions", "$defs", "dependentSchemas"];

/** A copy of the schema without `pattern` and `patternProperties` anywhere a subschema can be. */
export function withoutRegexes(schema: unknown): unknown {
  if (!schema || typeof schema !== "object" || Array.isArray(schema)) return schema;
  const copy: Record<string, unknown> = { ...(schema as Record<string, unknown>) };
  delete copy.pattern;
  delete copy.patternProperties;
  for (const key of ONE) if (key in copy && !Array.isArray(copy[key])) copy[key] = withoutRegexes(copy[key]);
  for (const key of LIST) {
    const value = copy[key];
    if (Array.isArray(value)) copy[key] = value.map(withoutRegexes);
  }
  for (const key of MAP) {
    const value = copy[key];
    if (value && typeof value === "object" && !Array.isArray(value)) {
      copy[key] = Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([name, sub]) => [name, withoutRegexes(sub)]),
      );
    }
  }
  return copy;
}
