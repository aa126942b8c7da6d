import { HttpError, badRequest } from "@stavrobot/common";
import type { ToolParameter } from "@stavrobot/common";

export const MAX_FILES_BYTES = 25 * 1024 * 1024;

export interface InputFile {
  param: string;
  filename: string;
  data: Buffer;
}

export interface ValidatedParams {
  /** Every non-file parameter, as given. */
  values: Record<string, unknown>;
  /** `file` parameters, decoded; the runner writes them to disk and passes their paths. */
  files: InputFile[];
}

const BASE64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/;

/**
 * Checks parameters against a tool manifest (not JSON Schema: every parameter is optional).
 * Errors are 400s that name the parameter and carry the tool's parameter schema.
 */
export function validateParams(
  schema: Record<string, ToolParameter>,
  input: Record<string, unknown>,
  maxFilesBytes = MAX_FILES_BYTES,
): ValidatedParams {
  const details = { parameters: schema };
  for (const key of Object.keys(input)) {
    if (!Object.hasOwn(schema, key)) throw badRequest(`Unknown parameter: "${key}"`, details);
  }
  const values: Record<string, unknown> = {};
  const files: InputFile[] = [];
  let fileBytes = 0;
  for (const [key, value] of Object.entries(input)) {
    const type = (schema[key] as ToolParameter).type;
    const wrongType = (): HttpError => badRequest(`Parameter "${key}" must be of type "${type}"`, details);
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
        if (!BASE64.test(file.data))
          throw badRequest(`Parameter "${key}": data is not valid base64`, details);
        const filename = safeFilename(file.filename);
        if (!filename) throw badRequest(`Parameter "${key}": invalid filename "${file.filename}"`, details);
        const data = Buffer.from(file.data, "base64");
        fileBytes += data.length;
        if (fileBytes > maxFilesBytes) {
          throw new HttpError(413, `Files exceed the ${Math.round(maxFilesBytes / 1024 / 1024)} MB limit`);
        }
        files.push({ param: key, filename, data });
        continue;
      }
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

/** A plain file name: no directories, no `.`/`..`, no control characters, at most 255 bytes. */
export function safeFilename(name: string): string | undefined {
  if (name.length === 0 || name === "." || name === ".." || Buffer.byteLength(name) > 255) return undefined;
  // eslint-disable-next-line no-control-regex
  if (/[/\\\x00-\x1f]/.test(name)) return undefined;
  return name;
}
