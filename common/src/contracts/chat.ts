import { z } from "zod";
import { CHAT_MAX_FILES, idempotencyKeySchema, storableString } from "./wire.js";

/** A turn's id: the inbox id of the message it runs for (the app's `inbox.id`, a 32-bit serial). */
export const turnIdSchema = z.number().int().positive().max(2_147_483_647);

/** A file already stored by the app (e.g. an upload), referenced by path. */
export const attachmentSchema = z.strictObject({
  storedPath: storableString().min(1),
  originalFilename: storableString().min(1),
  mimeType: storableString().min(1),
  size: z.number().int().nonnegative(),
});

/** A file carried inline as base64, for senders that cannot write to the app's disk. */
export const inlineFileSchema = z.strictObject({
  data: z.string(),
  filename: storableString().min(1).max(255),
  mimeType: storableString().min(1).max(200).default("application/octet-stream"),
});

/**
 * A plugin's run that ended on its own time (an async tool, an init script), as the runner sends
 * it back: the same outcome a synchronous run answers with, which the app turns into the model's
 * text exactly as it does a synchronous one (`plugins/result.ts`). Files ride as base64.
 */
export const pluginResultSchema = z.strictObject({
  plugin: storableString().min(1).max(200),
  /** The tool that ran; absent for the plugin's init script. */
  tool: storableString().min(1).max(200).optional(),
  outcome: z.union([
    z.strictObject({
      success: z.literal(true),
      output: z.unknown(),
      files: z
        .array(z.strictObject({ filename: storableString().min(1).max(255), data: z.string() }))
        .max(CHAT_MAX_FILES)
        .optional(),
      warnings: z.array(storableString()).optional(),
    }),
    z.strictObject({ success: z.literal(false), error: storableString() }),
  ]),
});
export type PluginResult = z.infer<typeof pluginResultSchema>;

/**
 * `POST /chat` on the app (external port with the owner's password, internal port with the
 * internal service secret). At least one content field must be present.
 */
export const chatRequestSchema = z
  .strictObject({
    message: storableString().optional(),
    audio: z.string().optional(),
    audioContentType: storableString().max(200).optional(),
    attachments: z.array(attachmentSchema).max(CHAT_MAX_FILES).optional(),
    files: z.array(inlineFileSchema).max(CHAT_MAX_FILES).optional(),
    source: storableString().min(1).max(200).optional(),
    sender: storableString().min(1).max(200).optional(),
    /**
     * Set by services that retry deliveries (outboxes): a second request with the same key is
     * recognised and not processed again.
     */
    idempotencyKey: idempotencyKeySchema.optional(),
    /** A plugin's result (internal port: the plugin-runner's outbox). */
    pluginResult: pluginResultSchema.optional(),
    /**
     * A plugin's message about a run (its result, or that it was cut off): the app's turn that
     * started the run, as the app named it in `X-Stavrobot-Turn`. The message goes back to that
     * turn's agent and person (a subagent's run reports to the subagent); without it, to the main
     * agent. Only a `plugin:` source may carry it.
     */
    turn: turnIdSchema.optional(),
  })
  .refine(
    (body) =>
      (body.message !== undefined && body.message.trim().length > 0) ||
      body.audio !== undefined ||
      (body.attachments?.length ?? 0) > 0 ||
      (body.files?.length ?? 0) > 0 ||
      body.pluginResult !== undefined,
    {
      message: "At least one of 'message', 'audio', 'attachments', 'files' or 'pluginResult' must be present",
    },
  );

export type ChatRequest = z.infer<typeof chatRequestSchema>;
export type Attachment = z.infer<typeof attachmentSchema>;
export type InlineFile = z.infer<typeof inlineFileSchema>;

export const chatResponseSchema = z.object({ response: z.string() });
export type ChatResponse = z.infer<typeof chatResponseSchema>;

/**
 * `POST /progress` (app, internal port): how far a tool the turn runs has got (an MCP server's
 * progress notifications), reported by the plugin-runner for the turn the app named in its
 * `X-Stavrobot-Turn` header. Best effort: nothing is kept.
 */
export const toolProgressSchema = z.strictObject({
  turn: z.number().int().positive(),
  plugin: z.string().min(1).max(64),
  tool: z.string().min(1).max(128),
  progress: z.number().finite(),
  total: z.number().finite().optional(),
  message: z.string().max(500).optional(),
});
export type ToolProgress = z.infer<typeof toolProgressSchema>;

/**
 * The header naming the turn (its inbox id) a tool runs for, so its progress can follow and an
 * async run's result goes back to that turn's agent.
 */
export const TURN_HEADER = "x-stavrobot-turn";
