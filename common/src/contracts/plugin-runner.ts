import { z } from "zod";

/**
 * Wire contract of the plugin-runner service (internal port 3003, `Authorization: Bearer <internal
 * secret>` on every route but `GET /health`). The runner validates requests with these schemas and
 * the app's client parses responses with them. Plugin config VALUES only ever travel in
 * `bundleConfigResponseSchema`, which is for the admin UI and must never reach the LLM.
 */

export const PLUGIN_NAME_PATTERN = /^[a-z0-9-]+$/;

export const pluginNameSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(PLUGIN_NAME_PATTERN, "Plugin names may only contain lowercase letters, digits and hyphens");

export const parameterTypeSchema = z.enum(["string", "integer", "number", "boolean", "file"]);
export type ParameterType = z.infer<typeof parameterTypeSchema>;

export const toolParameterSchema = z.object({ type: parameterTypeSchema, description: z.string() });
export type ToolParameter = z.infer<typeof toolParameterSchema>;

export const toolSummarySchema = z.object({
  name: z.string(),
  description: z.string(),
  async: z.boolean(),
  parameters: z.record(z.string(), toolParameterSchema),
});
export type ToolSummary = z.infer<typeof toolSummarySchema>;

/** Whether a declared config key has a value; the value itself is never part of this. */
export const configKeyStatusSchema = z.object({
  description: z.string(),
  required: z.boolean(),
  configured: z.boolean(),
});

export const bundleSummarySchema = z.object({
  name: z.string(),
  description: z.string(),
  editable: z.boolean(),
});
export type BundleSummary = z.infer<typeof bundleSummarySchema>;

/** `GET /bundles` */
export const listBundlesResponseSchema = z.object({ plugins: z.array(bundleSummarySchema) });

/** `GET /bundles/:name` */
export const bundleDetailSchema = bundleSummarySchema.extend({
  tools: z.array(toolSummarySchema),
  instructions: z.string().optional(),
  config: z.record(z.string(), configKeyStatusSchema).optional(),
});
export type BundleDetail = z.infer<typeof bundleDetailSchema>;

export const configEntrySchema = z.object({
  description: z.string(),
  required: z.boolean(),
  default: z.unknown().optional(),
});

/** `GET /bundles/:name/config` (admin UI only: carries the values). */
export const bundleConfigResponseSchema = z.object({
  schema: z.record(z.string(), configEntrySchema),
  values: z.record(z.string(), z.unknown()),
});

/** A file carried inline: a `file` parameter on the way in, an output file on the way out. */
export const transportedFileSchema = z.object({ filename: z.string().min(1), data: z.string() });
export type TransportedFile = z.infer<typeof transportedFileSchema>;

/** `POST /bundles/:name/tools/:tool/run` body: the parameters, checked against the tool manifest. */
export const runToolRequestSchema = z.record(z.string(), z.unknown());

export const runToolSuccessSchema = z.object({
  success: z.literal(true),
  output: z.unknown(),
  files: z.array(transportedFileSchema).optional(),
  /** e.g. that stdout was truncated or an output file was left out. */
  warnings: z.array(z.string()).optional(),
});
/** Sent with status 500. */
export const runToolFailureSchema = z.object({ success: z.literal(false), error: z.string() });
/** Sent with status 202 for async tools; the result arrives later as a chat message. */
export const runToolRunningSchema = z.object({ status: z.literal("running") });
export const runToolResponseSchema = z.union([runToolSuccessSchema, runToolRunningSchema]);
export type RunToolSuccess = z.infer<typeof runToolSuccessSchema>;
export type RunToolFailure = z.infer<typeof runToolFailureSchema>;

export const messageResponseSchema = z.object({ message: z.string() });

/** `POST /create` → 201 `{message}` */
export const createPluginRequestSchema = z.strictObject({
  name: pluginNameSchema,
  description: z.string().trim().min(1).max(2000),
});

/** `POST /install` */
export const installRequestSchema = z.strictObject({ url: z.string().trim().min(1).max(2048) });

export const missingConfigSchema = z.object({ key: z.string(), description: z.string() });

export const installResponseSchema = z.object({
  name: z.string(),
  description: z.string(),
  config: z.record(z.string(), configKeyStatusSchema).optional(),
  instructions: z.string().optional(),
  init_output: z.string().optional(),
  missing_config: z.array(missingConfigSchema).optional(),
  warnings: z.array(z.string()).optional(),
  message: z.string(),
});
export type InstallResponse = z.infer<typeof installResponseSchema>;

/** `POST /update` and `POST /remove` */
export const pluginNameRequestSchema = z.strictObject({ name: pluginNameSchema });

export const updateResponseSchema = installResponseSchema;
export type UpdateResponse = InstallResponse;

/** `POST /configure`: keys must be declared in the manifest's `config`; `null` removes a value. */
export const configureRequestSchema = z.strictObject({
  name: pluginNameSchema,
  config: z.record(z.string(), z.unknown()),
});

export const configureResponseSchema = z.object({ message: z.string(), warnings: z.array(z.string()) });

export const healthResponseSchema = z.object({ status: z.literal("ok") });
