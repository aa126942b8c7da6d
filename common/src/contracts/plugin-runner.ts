import { z } from "zod";
import { RUN_FILES_LIMIT_BYTES } from "./wire.js";

/**
 * Wire contract of the plugin-runner service (internal port 3003, `Authorization: Bearer <internal
 * secret>` on every route but `GET /health`). The runner validates requests with these schemas and
 * the app's client parses responses with them. Plugin config VALUES never travel on this API: the
 * runner reports which keys are set, nothing more.
 */

export const PLUGIN_NAME_PATTERN = /^[a-z0-9-]+$/;

export const pluginNameSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(PLUGIN_NAME_PATTERN, "Plugin names may only contain lowercase letters, digits and hyphens");

/** Types the runner checks. A manifest may name others (e.g. "array"): accepted without checking. */
export const CHECKED_PARAMETER_TYPES = ["string", "integer", "number", "boolean", "file"] as const;

export const toolParameterSchema = z.object({ type: z.string(), description: z.string() });
export type ToolParameter = z.infer<typeof toolParameterSchema>;

export const toolSummarySchema = z.object({
  name: z.string(),
  description: z.string(),
  async: z.boolean(),
  /** Stavrobot's flat parameters; for a JSON Schema format, a flat view of `schema`'s properties. */
  parameters: z.record(z.string(), toolParameterSchema),
  /** The JSON Schema the plugin declared (Cyclop One, Workbench), exactly as declared. */
  schema: z.record(z.string(), z.unknown()).optional(),
  /** Osaurus's permission policy: `ask` waits for the owner's approval, `deny` never runs. */
  policy: z.enum(["auto", "ask", "deny"]).optional(),
  /** Why the tool cannot run on this machine (a macOS permission an Osaurus tool needs). */
  unavailable: z.string().optional(),
  /**
   * An MCP server says the tool only reads (its `readOnlyHint` annotation). A hint, not a promise:
   * the app's trust gate believes it only for servers the owner names (`[trust] readOnlyHints`).
   */
  readOnlyHint: z.boolean().optional(),
});
export type ToolSummary = z.infer<typeof toolSummarySchema>;

/**
 * Which tools of a plugin may run, set by the owner only: `["*"]` (all, the default), `[]` (the
 * plugin is disabled), or tool names.
 */
export const permissionsSchema = z.array(z.string().min(1).max(64)).max(1000);
export type Permissions = z.infer<typeof permissionsSchema>;

export function isToolPermitted(permissions: Permissions, tool: string): boolean {
  return permissions.includes("*") || permissions.includes(tool);
}

/** Whether a declared config key has a value; the value itself is never part of this. */
export const configKeyStatusSchema = z.object({
  description: z.string(),
  required: z.boolean(),
  configured: z.boolean(),
});

/** The plugin formats the runner hosts (a plugin's `format`; absent from older runners: Stavrobot). */
export const PLUGIN_FORMATS = ["stavrobot", "cyclopone", "workbench", "mcp", "osaurus"] as const;

/** How an MCP server is doing, as the owner's Plugins page and the runner's health show it. */
export const mcpServerStatusSchema = z.object({
  transport: z.enum(["stdio", "streamable-http", "sse"]),
  state: z.enum(["starting", "running", "restarting", "failed", "disabled"]),
  /** The last failure (start, crash, refused), secrets removed. */
  lastError: z.string().optional(),
  /** Failures in a row since it last ran well. */
  failures: z.number().int().min(0),
  /** OAuth (a remote server that asks for sign-in): `needed` until the owner signs in again. */
  signIn: z.enum(["needed", "ok"]).optional(),
});
export type McpServerStatus = z.infer<typeof mcpServerStatusSchema>;

export const pluginSummarySchema = z.object({
  name: z.string(),
  description: z.string(),
  editable: z.boolean(),
  permissions: permissionsSchema,
  format: z.enum(PLUGIN_FORMATS).optional(),
  /** The version the plugin declares, when its format has one. */
  version: z.string().optional(),
  /** The permissions the plugin asked for, in its format's words (Cyclop One's `permissions`). */
  asks: z.array(z.string()).optional(),
  /** Whether its processes have network (its declaration, unless the owner switched it off). */
  network: z.boolean().optional(),
  /** Whether its format lets it have network at all (the owner can switch it off, not give more). */
  networkAllowed: z.boolean().optional(),
  /** Tools waiting for the owner's approval of this version (formats that ask for approval). */
  waitingApproval: z.array(z.string()).optional(),
  /** An MCP server's transport and state (format "mcp"). */
  server: mcpServerStatusSchema.optional(),
  /** The skills (SKILL.md) the plugin ships, which the model reads on demand (Osaurus). */
  skills: z.array(z.object({ name: z.string(), description: z.string() })).optional(),
  /** Whether its package's signature was verified against a trusted key at install (Osaurus). */
  verified: z.boolean().optional(),
});
export type PluginSummary = z.infer<typeof pluginSummarySchema>;

/** Whether the runner can take the network away from a plugin (see the runner's README). */
export const networkStatusSchema = z.object({
  /** The sandbox removes the network from plugins that must not have it (namespaces mode). */
  enforced: z.boolean(),
  /** Where it cannot, the owner's configuration lets such plugins run anyway. */
  allowWithoutCut: z.boolean(),
});
export type NetworkStatus = z.infer<typeof networkStatusSchema>;

/** `GET /bundles` */
export const listPluginsResponseSchema = z.object({
  plugins: z.array(pluginSummarySchema),
  network: networkStatusSchema.optional(),
});

/** `GET /bundles/:name`: every tool, whatever the permissions (callers facing the model filter). */
export const pluginDetailSchema = pluginSummarySchema.extend({
  tools: z.array(toolSummarySchema),
  instructions: z.string().optional(),
  config: z.record(z.string(), configKeyStatusSchema).optional(),
  /**
   * The longest a sync run of it may take on the runner, when that is longer than for plugins of
   * the other formats: an MCP server's call may wait for the owner's answers to its questions.
   */
  runSeconds: z.number().positive().optional(),
});
export type PluginDetail = z.infer<typeof pluginDetailSchema>;

export const configEntrySchema = z.object({
  description: z.string(),
  required: z.boolean(),
  default: z.unknown().optional(),
});

/** `GET /bundles/:name/config` (owner UI): the declared keys, which are set, and the permissions. */
export const pluginConfigResponseSchema = z.object({
  schema: z.record(z.string(), configEntrySchema),
  configured: z.record(z.string(), z.boolean()),
  permissions: permissionsSchema,
});

/** A file carried inline: a `file` parameter on the way in, an output file on the way out. */
export const transportedFileSchema = z.object({ filename: z.string().min(1), data: z.string() });
export type TransportedFile = z.infer<typeof transportedFileSchema>;

/** Total decoded size of the files given to one run, and of those it hands back. */
export const PLUGIN_FILES_LIMIT_BYTES = RUN_FILES_LIMIT_BYTES;

/** `POST /bundles/:name/tools/:tool/run` body: the parameters, checked against the tool manifest. */
export const runToolRequestSchema = z.record(z.string(), z.unknown());

export const runToolSuccessSchema = z.object({
  success: z.literal(true),
  output: z.unknown(),
  files: z.array(transportedFileSchema).optional(),
  /** e.g. that stdout was truncated or an output file was left out. */
  warnings: z.array(z.string()).optional(),
});
/**
 * The tool ran and failed (exit code, timeout, could not start): an ordinary outcome, answered
 * with 200 like a success. HTTP errors are kept for requests the runner refuses.
 */
export const runToolFailureSchema = z.object({ success: z.literal(false), error: z.string() });
/** Sent with status 202 for async tools; the result arrives later as a chat message. */
export const runToolRunningSchema = z.object({ status: z.literal("running") });
export const runToolResponseSchema = z.union([
  runToolSuccessSchema,
  runToolFailureSchema,
  runToolRunningSchema,
]);
export type RunToolSuccess = z.infer<typeof runToolSuccessSchema>;
export type RunToolFailure = z.infer<typeof runToolFailureSchema>;

export const messageResponseSchema = z.object({ message: z.string() });

/** `POST /create` → 201 `{message}` */
export const createPluginRequestSchema = z.strictObject({
  name: pluginNameSchema,
  description: z.string().trim().min(1).max(2000),
});

/** Osaurus packages larger than this are refused (the runner's own limit too). */
export const PACKAGE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * `POST /install`: a git URL or the http(s) URL of an Osaurus `<plugin_id>-<version>.zip`; or an
 * Osaurus package the owner uploaded, inline (`filename` must follow the same convention).
 */
export const installRequestSchema = z.union([
  z.strictObject({ url: z.string().trim().min(1).max(2048) }),
  z.strictObject({
    package: z.strictObject({
      filename: z.string().min(1).max(255),
      data: z.string().max(Math.ceil(PACKAGE_LIMIT_BYTES / 3) * 4),
      /** Its `.minisig` signature, when the owner has one. */
      signature: z
        .string()
        .max(64 * 1024)
        .optional(),
    }),
  }),
]);

/** `GET /bundles/:name/skills/:skill`: one skill's SKILL.md, for the model to read. */
export const skillResponseSchema = z.object({ name: z.string(), description: z.string(), text: z.string() });

export const missingConfigSchema = z.object({ key: z.string(), description: z.string() });

export const installResponseSchema = z.object({
  name: z.string(),
  description: z.string(),
  config: z.record(z.string(), configKeyStatusSchema).optional(),
  instructions: z.string().optional(),
  init_output: z.string().optional(),
  missing_config: z.array(missingConfigSchema).optional(),
  warnings: z.array(z.string()).optional(),
  /** The plugin's format (absent from older runners: Stavrobot). */
  format: z.enum(PLUGIN_FORMATS).optional(),
  /** For the model: what happened, what to relay to the owner and what not to obey. */
  message: z.string(),
  /** For a person (the Plugins page): what happened and what they still have to do, and where. */
  summary: z.string().optional(),
});
export type InstallResponse = z.infer<typeof installResponseSchema>;

/**
 * `POST /install` with `Prefer: respond-async`: 202 `{jobId}` at once, and the install runs as a
 * job whose progress `GET /jobs/:id` reports (the owner's settings page shows it). Without the
 * header the install is one blocking call answering `installResponseSchema`, as before.
 */
export const installJobStartedSchema = z.object({ jobId: z.string() });

export const INSTALL_JOB_STATES = ["cloning", "init", "done", "failed"] as const;
export type InstallJobState = (typeof INSTALL_JOB_STATES)[number];

/** `GET /jobs/:id` (404 once the job has expired or never existed). */
export const installJobSchema = z.object({
  id: z.string(),
  state: z.enum(INSTALL_JOB_STATES),
  url: z.string(),
  startedAt: z.string(),
  finishedAt: z.string().optional(),
  /** What the init script printed, capped, once it is known. */
  output: z.string().optional(),
  /** `done`: what the blocking install would have answered. */
  result: installResponseSchema.optional(),
  /** `failed`: the error, and the HTTP status the blocking install would have answered with. */
  error: z.string().optional(),
  status: z.number().int().optional(),
});
export type InstallJob = z.infer<typeof installJobSchema>;

/** `POST /approve` (owner only): every tool waiting, or the one named. */
export const approveRequestSchema = z.strictObject({
  name: pluginNameSchema,
  tool: z.string().min(1).max(200).optional(),
});
export const approveResponseSchema = z.object({ message: z.string(), approved: z.array(z.string()) });

/** `POST /network` (owner only): switches a plugin's network off, or on again where it may have it. */
export const networkRequestSchema = z.strictObject({ name: pluginNameSchema, network: z.boolean() });

/** `POST /update` and `POST /remove` */
export const pluginNameRequestSchema = z.strictObject({ name: pluginNameSchema });

export const updateResponseSchema = installResponseSchema;
export type UpdateResponse = InstallResponse;

/**
 * `POST /configure`: keys must be declared in the manifest's `config`; `null` removes a value.
 * `permissions` (owner only: the app's model-facing tool never sends it) replaces the permissions.
 */
export const configureRequestSchema = z.strictObject({
  name: pluginNameSchema,
  config: z.record(z.string(), z.unknown()),
});

export const configureResponseSchema = z.object({ message: z.string(), warnings: z.array(z.string()) });

export const sandboxStatusSchema = z.object({
  mode: z.enum(["namespaces", "plain"]),
  users: z.boolean(),
  reason: z.string().optional(),
});

export const healthResponseSchema = z.object({
  status: z.literal("ok"),
  sandbox: sandboxStatusSchema.optional(),
  network: networkStatusSchema.optional(),
});

/** An MCP server's question to the owner (elicitation): four letters or digits they type back. */
export const QUESTION_ID_PATTERN = /^[a-z2-9]{4}$/;
/** The longest question text the runner sends the app. */
export const MAX_QUESTION_CHARS = 8_000;

/**
 * `POST /questions/:id` (runner): the owner's answer to an MCP server's question. `values` are
 * the owner's words per field (`key=value`), which the runner checks against the server's form.
 * 200 `{message}` to tell the owner; 404 when no such question waits; 400 naming what is wrong
 * (the question keeps waiting).
 */
export const questionAnswerSchema = z.strictObject({
  action: z.enum(["accept", "decline", "cancel"]),
  values: z.record(z.string(), z.string().max(4_000)).optional(),
});
export type QuestionAnswer = z.infer<typeof questionAnswerSchema>;
export const questionAnswerResponseSchema = z.object({ message: z.string() });

/**
 * `POST /questions` (app, internal port): an MCP server's question, worded for the owner by the
 * runner; the app tells the owner on their channel and in the web admin's notifications.
 */
export const ownerQuestionSchema = z.strictObject({
  id: z.string().regex(QUESTION_ID_PATTERN),
  plugin: z.string().min(1).max(64),
  text: z.string().min(1).max(MAX_QUESTION_CHARS),
});
export type OwnerQuestion = z.infer<typeof ownerQuestionSchema>;
