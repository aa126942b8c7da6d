import { z } from "zod";
import { PLUGIN_NAME_PATTERN, formatZodError } from "@stavrobot/common";

/**
 * The Stavrobot plugin format, read from disk: the plugin's `manifest.json` at its root and one
 * `manifest.json` per tool subdirectory. Unknown extra keys (e.g. `summary`) are ignored.
 */

/** Tool names become directory names and URL segments. */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]+$/;

const relativePath = z
  .string()
  .min(1)
  .refine((value) => !value.startsWith("/") && !value.includes("\0"), "must be a relative path");

export const configEntryManifestSchema = z.object({
  description: z.string(),
  required: z.boolean(),
  default: z.unknown().optional(),
});
export type ConfigEntry = z.infer<typeof configEntryManifestSchema>;

export const pluginManifestSchema = z.object({
  name: z.string().regex(PLUGIN_NAME_PATTERN, "must match ^[a-z0-9-]+$").max(64),
  description: z.string(),
  instructions: z.string().optional(),
  config: z.record(z.string(), configEntryManifestSchema).optional(),
  init: z.object({ entrypoint: relativePath, async: z.boolean().optional() }).optional(),
});
export type PluginManifest = z.infer<typeof pluginManifestSchema>;

export const toolManifestSchema = z.object({
  name: z.string().max(64).regex(TOOL_NAME_PATTERN, "must match ^[A-Za-z0-9_-]+$"),
  description: z.string(),
  entrypoint: relativePath,
  async: z.boolean().optional(),
  // Types other than the checked ones (e.g. "array") are kept and passed through unchecked.
  parameters: z
    .record(
      z.string().max(200),
      z.object({ type: z.string().min(1).max(64), description: z.string().default("") }),
    )
    .default({}),
});
export type ToolManifest = z.infer<typeof toolManifestSchema>;

/** Parses manifest bytes; the error says what is wrong without quoting the file. */
export function parseManifest<T extends z.ZodType>(raw: Buffer, schema: T): z.infer<T> {
  let value: unknown;
  try {
    value = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new Error("manifest.json is not valid JSON");
  }
  const result = schema.safeParse(value);
  if (!result.success) throw new Error(`manifest.json is invalid: ${formatZodError(result.error)}`);
  return result.data;
}
