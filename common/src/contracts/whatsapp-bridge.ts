import { z } from "zod";
import { e164Schema, SIGNAL_ATTACHMENT_LIMIT_BYTES, base64DecodedLength } from "./signal-bridge.js";
import { storableString } from "./wire.js";

/**
 * Wire contract of the whatsapp-bridge service (port 8082, `Authorization: Bearer <internal
 * secret>` on every route but `GET /health`). Messages the bridge receives travel to the app as
 * ordinary `POST /chat` requests (`source: "whatsapp"`, `sender: <E.164 number>`).
 */

const MB = 1024 * 1024;

/** An attachment sent with `POST /send`, decoded (WhatsApp's own limit for documents is far higher). */
export const WHATSAPP_ATTACHMENT_LIMIT_BYTES = SIGNAL_ATTACHMENT_LIMIT_BYTES;
export const WHATSAPP_SEND_BODY_LIMIT_BYTES = Math.ceil((WHATSAPP_ATTACHMENT_LIMIT_BYTES * 4) / 3) + 2 * MB;
/** WhatsApp refuses text messages much longer than this. */
export const WHATSAPP_MESSAGE_MAX_CHARS = 60_000;

/** `POST /send`: a message (Markdown, converted to WhatsApp's formatting), an attachment, or both. */
export const whatsappSendRequestSchema = z
  .strictObject({
    recipient: e164Schema,
    message: storableString().max(WHATSAPP_MESSAGE_MAX_CHARS).optional(),
    /** The file's bytes as base64. */
    attachment: z
      .string()
      .superRefine((data, ctx) => {
        const size = base64DecodedLength(data);
        if (size === undefined) ctx.addIssue({ code: "custom", message: "must be base64" });
        else if (size > WHATSAPP_ATTACHMENT_LIMIT_BYTES)
          ctx.addIssue({
            code: "custom",
            message: `must be at most ${WHATSAPP_ATTACHMENT_LIMIT_BYTES} bytes`,
          });
      })
      .optional(),
    /** The name the recipient sees; only its base name is used. Default "attachment.bin". */
    attachmentFilename: storableString().min(1).max(255).optional(),
  })
  .refine(
    (body) => (body.message !== undefined && body.message.trim().length > 0) || body.attachment !== undefined,
    { message: "At least one of 'message' or 'attachment' must be present" },
  );
export type WhatsAppSendRequest = z.infer<typeof whatsappSendRequestSchema>;

/** 200 from `POST /send`: the WhatsApp ids of the messages sent (text and file may be two). */
export const whatsappSendResponseSchema = z.object({ ok: z.literal(true), ids: z.array(z.string()) });

/**
 * The connection's state: `unlinked` (no session: link it from the web page), `qr` / `code`
 * (linking, a QR code or a pairing code is shown), `connecting`, `open`, `loggedOut` (the phone
 * removed this device: link again), `replaced` (another session took over; stopped until the owner
 * links or restarts), `outdated` (WhatsApp refuses this client version, retried with backoff),
 * `failing` (the connection keeps closing; retried with capped backoff, forever).
 */
export const whatsappStates = [
  "unlinked",
  "qr",
  "code",
  "connecting",
  "open",
  "loggedOut",
  "replaced",
  "outdated",
  "failing",
] as const;
export type WhatsAppState = (typeof whatsappStates)[number];

/** `GET /health` (open): no QR code or pairing code here, only the state. */
export const whatsappBridgeHealthSchema = z.object({
  status: z.literal("ok"),
  whatsapp: z.enum(whatsappStates),
  /** While not open: why, and what to do. */
  problem: z.string().optional(),
  /** The linked number, once known. */
  account: z.string().optional(),
  /** ISO time of the last message received. */
  lastInbound: z.string().optional(),
  /** The last error the connection closed with, and when. */
  lastError: z.string().optional(),
  lastErrorAt: z.string().optional(),
});
export type WhatsAppBridgeHealth = z.infer<typeof whatsappBridgeHealthSchema>;

/** `GET /link` (behind the secret): the state, and what the owner needs to link now. */
export const whatsappLinkStatusSchema = whatsappBridgeHealthSchema.omit({ status: true }).extend({
  /** The QR code's text while `qr` (it rotates: ask again). */
  qr: z.string().optional(),
  /** The pairing code while `code`, to type on the phone. */
  code: z.string().optional(),
});
export type WhatsAppLinkStatus = z.infer<typeof whatsappLinkStatusSchema>;

/** `POST /link`: start linking with a QR code, or with a pairing code for the given number. */
export const whatsappLinkRequestSchema = z.discriminatedUnion("method", [
  z.strictObject({ method: z.literal("qr") }),
  z.strictObject({ method: z.literal("code"), phoneNumber: e164Schema }),
]);
export type WhatsAppLinkRequest = z.infer<typeof whatsappLinkRequestSchema>;
