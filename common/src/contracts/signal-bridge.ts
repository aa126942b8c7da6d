import { z } from "zod";
import { storableString } from "./wire.js";

/**
 * Wire contract of the signal-bridge service (port 8081, `Authorization: Bearer <internal secret>`
 * on every route but `GET /health`). The bridge validates requests with these schemas and the
 * app's client parses responses with them. Messages the bridge receives travel the other way, as
 * ordinary `POST /chat` requests (`source: "signal"`, `sender: <E.164 number>`).
 */

const MB = 1024 * 1024;

/** An attachment sent with `POST /send`, decoded. */
export const SIGNAL_ATTACHMENT_LIMIT_BYTES = 25 * MB;
/** `POST /send` body: the attachment as base64 (4/3 of its size) plus the message and some room. */
export const SIGNAL_SEND_BODY_LIMIT_BYTES = Math.ceil((SIGNAL_ATTACHMENT_LIMIT_BYTES * 4) / 3) + 2 * MB;
/** Longer replies are still delivered: signal-cli sends long text as an attachment itself. */
export const SIGNAL_MESSAGE_MAX_CHARS = 200_000;

/** A phone number in E.164 form, the only identity the bridge sends to or reports. */
export const E164_PATTERN = /^\+[1-9]\d{1,14}$/;
export const e164Schema = z.string().regex(E164_PATTERN, "an E.164 phone number such as +15555550123");

const BASE64_PATTERN = /^[A-Za-z0-9+/]*={0,2}$/;

/** The decoded size of strict base64 (whitespace allowed between groups), or undefined if it is not base64. */
export function base64DecodedLength(data: string): number | undefined {
  const compact = data.replace(/\s+/g, "");
  if (!BASE64_PATTERN.test(compact) || compact.length % 4 === 1) return undefined;
  const padding = compact.endsWith("==") ? 2 : compact.endsWith("=") ? 1 : 0;
  return Math.floor((compact.length * 3) / 4) - padding;
}

/** `POST /send`: a message (Markdown, converted to Signal styles), an attachment, or both. */
export const signalSendRequestSchema = z
  .strictObject({
    recipient: e164Schema,
    message: storableString().max(SIGNAL_MESSAGE_MAX_CHARS).optional(),
    /** The file's bytes as base64. */
    attachment: z
      .string()
      .superRefine((data, ctx) => {
        const size = base64DecodedLength(data);
        if (size === undefined) ctx.addIssue({ code: "custom", message: "must be base64" });
        else if (size > SIGNAL_ATTACHMENT_LIMIT_BYTES)
          ctx.addIssue({ code: "custom", message: `must be at most ${SIGNAL_ATTACHMENT_LIMIT_BYTES} bytes` });
      })
      .optional(),
    /** The name the recipient sees; only its base name is used. Default "attachment.bin". */
    attachmentFilename: storableString().min(1).max(255).optional(),
  })
  .refine(
    (body) => (body.message !== undefined && body.message.trim().length > 0) || body.attachment !== undefined,
    { message: "At least one of 'message' or 'attachment' must be present" },
  );
export type SignalSendRequest = z.infer<typeof signalSendRequestSchema>;

/** 200 from `POST /send`: `timestamp` is the Signal timestamp of the sent message. */
export const signalSendResponseSchema = z.object({ ok: z.literal(true), timestamp: z.number().int() });
export type SignalSendResponse = z.infer<typeof signalSendResponseSchema>;

/**
 * 429 from `POST /send`: Signal refused to send until a captcha is solved (at
 * https://signalcaptchas.org/challenge/generate) and passed to `POST /challenge`, or the time passed.
 */
export const signalRateLimitedSchema = z.object({
  error: z.literal("rate_limited"),
  retryAfterSeconds: z.number().int().nonnegative(),
  /** The challenge the bridge keeps for `POST /challenge`; informational. */
  challengeToken: z.string().optional(),
});
export type SignalRateLimited = z.infer<typeof signalRateLimitedSchema>;

/** `POST /challenge`: the solved captcha (`signalcaptcha://…`) for the pending rate-limit challenge. */
export const signalChallengeRequestSchema = z.strictObject({
  captcha: z.string().trim().min(1).max(10_000),
});
export type SignalChallengeRequest = z.infer<typeof signalChallengeRequestSchema>;

export const signalChallengeResponseSchema = z.object({ ok: z.literal(true) });

/**
 * Whether the bridge's signal-cli daemon answers: `starting` until its first health check passes,
 * `missing` while the program is not installed where the bridge looks (`SIGNAL_CLI_PATH`), `down`
 * when it stopped or could not be started otherwise.
 */
export const signalCliStates = ["running", "starting", "down", "missing"] as const;
export type SignalCliState = (typeof signalCliStates)[number];

/** `GET /health` (open). */
export const signalBridgeHealthSchema = z.object({
  status: z.literal("ok"),
  signalCli: z.enum(signalCliStates),
  /** While signal-cli does not run: why, and what to do (install it, set SIGNAL_CLI_PATH…). */
  problem: z.string().optional(),
  account: z.string(),
});
export type SignalBridgeHealth = z.infer<typeof signalBridgeHealthSchema>;
