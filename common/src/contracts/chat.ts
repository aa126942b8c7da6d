import { z } from "zod";

/** A file already stored by the app (e.g. an upload), referenced by path. */
export const attachmentSchema = z.strictObject({
  storedPath: z.string().min(1),
  originalFilename: z.string().min(1),
  mimeType: z.string().min(1),
  size: z.number().int().nonnegative(),
});

/** A file carried inline as base64, for senders that cannot write to the app's disk. */
export const inlineFileSchema = z.strictObject({
  data: z.string(),
  filename: z.string().min(1).max(255),
  mimeType: z.string().min(1).default("application/octet-stream"),
});

/**
 * `POST /chat` on the app (external port with the owner's password, internal port with the
 * internal service secret). At least one content field must be present.
 */
export const chatRequestSchema = z
  .strictObject({
    message: z.string().optional(),
    audio: z.string().optional(),
    audioContentType: z.string().optional(),
    attachments: z.array(attachmentSchema).max(20).optional(),
    files: z.array(inlineFileSchema).max(20).optional(),
    source: z.string().min(1).max(200).optional(),
    sender: z.string().min(1).max(200).optional(),
    /**
     * Set by services that retry deliveries (the plugin-runner's outbox): a second request with the
     * same key is recognised and not processed again.
     */
    idempotencyKey: z
      .string()
      .regex(/^[A-Za-z0-9._:-]{8,200}$/, "8 to 200 letters, digits or . _ : -")
      .optional(),
  })
  .refine(
    (body) =>
      (body.message !== undefined && body.message.trim().length > 0) ||
      body.audio !== undefined ||
      (body.attachments?.length ?? 0) > 0 ||
      (body.files?.length ?? 0) > 0,
    { message: "At least one of 'message', 'audio', 'attachments' or 'files' must be present" },
  );

export type ChatRequest = z.infer<typeof chatRequestSchema>;
export type Attachment = z.infer<typeof attachmentSchema>;
export type InlineFile = z.infer<typeof inlineFileSchema>;

export const chatResponseSchema = z.object({ response: z.string() });
export type ChatResponse = z.infer<typeof chatResponseSchema>;
