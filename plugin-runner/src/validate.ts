import { DomainError, decodeBase64, safeFilename, unknownKeys } from "@stavrobot/common";
import type { ToolParameter } from "@stavrobot/common";
import { PLUGIN_FILES_LIMIT_BYTES } from "@stavrobot/common";

export interface InputFile {
  param: string;
  filename: string;
  data: Buffer;
}

export interface ValidatedParams {
  /** Every parameter the caller passed, exactly as given, except `file` parameters. */
  values: Record<string, unknown>;
  /** `file` parameters, decoded; the runner writes them beside the run and passes their paths. */
  files: InputFile[];
}

/**
 * Checks parameters against a tool manifest (not JSON Schema: every parameter is optional).
 * Unknown parameters are refused, naming them and the tool's parameters; the checked types
 * (string, integer, number, boolean, file) are enforced; any other declared type is passed on
 * unchecked. Errors are "invalid" DomainErrors (400) carrying the tool's parameter schema.
 */
export function validateParams(
  schema: Record<string, ToolParameter>,
  input: Record<string, unknown>,
  maxFilesBytes = PLUGIN_FILES_LIMIT_BYTES,
): ValidatedParams {
  const details = { parameters: schema };
  const unknown = Object.keys(input).filter((key) => !Object.hasOwn(schema, key));
  if (unknown.length > 0) {
    const label = unknown.length === 1 ? "Unknown parameter" : "Unknown parameters";
    throw new DomainError(
      "invalid",
      `${unknownKeys(unknown, label)}. Parameters of this tool: ${describeParameters(schema)}`,
      details,
    );
  }
  const values: Record<string, unknown> = {};
  const files: InputFile[] = [];
  let fileBytes = 0;
  for (const [key, value] of Object.entries(input)) {
    const type = (schema[key] as ToolParameter).type;
    const wrongType = (): DomainError =>
      new DomainError("invalid", `Parameter "${key}" must be of type "${type}"`, details);
    switch (type) {
      case "string":
        if (typeof value !== "string") throw wrongType();
        break;
      case "integer":
        if (typeof value !== "number" || !Number.isInteger(value)) throw wrongType();
        break;
      case "number":
        if (typeof value !== "number" || !Number.isFinite(value)) throw wrongType();
        break;
      case "boolean":
        if (typeof value !== "boolean") throw wrongType();
        break;
      case "file": {
        const file = asTransportedFile(value);
        if (!file) throw wrongType();
        const data = decodeBase64(file.data);
        if (!data) throw new DomainError("invalid", `Parameter "${key}": data is not valid base64`, details);
        const filename = safeFilename(file.filename);
        if (!filename) {
          throw new DomainError(
            "invalid",
            `Parameter "${key}": invalid filename "${file.filename}"`,
            details,
          );
        }
        fileBytes += data.length;
        if (fileBytes > maxFilesBytes) {
          throw new DomainError(
            "too-large",
            `Files exceed the ${Math.round(maxFilesBytes / 1024 / 1024)} MB limit`,
          );
        }
        files.push({ param: key, filename, data });
        continue;
      }
      default:
        // A type the runner does not know: the tool checks it itself.
        break;
    }
    values[key] = value;
  }
  return { values, files };
}

function asTransportedFile(value: unknown): { filename: string; data: string } | undefined {
  if (!value || typeof value !== "object" || Array.isArray(value)) return undefined;
  const keys = Object.keys(value);
  const record = value as Record<string, unknown>;
  if (keys.length !== 2 || typeof record.filename !== "string" || typeof record.data !== "string") {
    return undefined;
  }
  return { filename: record.filename, data: record.data };
}

/** `x (string), y (file)` — a tool's parameters for error messages, capped at ten. */
export function describeParameters(parameters: Record<string, ToolParameter>): string {
  const entries = Object.entries(parameters);
  if (entries.length === 0) return "(none)";
  const shown = entries.slice(0, 10).map(([key, spec]) => `${key} (${spec.type})`);
  if (entries.length > 10) shown.push(`and ${entries.length - 10} more`);
  return shown.join(", ");
}
