import { HttpError, errorMessage, readBody, safeEqual, type Handler } from "@stavrobot/common";
import { isDatabaseUnavailable } from "../../db/database.js";
import { storeFiles, removeFiles } from "../../files/uploads.js";
import { takeMessage, type IntakeDeps } from "../../queue/intake.js";
import { composeWhole, type ChannelContext, type ChannelDefinition } from "../channel.js";
import { normalizeAddress } from "./address.js";
import { ImapReader, imapSettings } from "./imap.js";
import { MAIL_LIMIT_BYTES, handleMail, letThrough, mailMessage, type MailInboundDeps } from "./inbound.js";
import type { ParsedMail } from "./parse.js";
import { SmtpSender, smtpSettings } from "./smtp.js";
import { EmailStore } from "./store.js";
import { addEmailSettingsRoutes } from "./settings.js";

/** What the email channel keeps while the app runs, one per wiring of the channels. */
interface EmailRuntime {
  store: EmailStore;
  sender: SmtpSender | undefined;
  reader: ImapReader | undefined;
  inbound: MailInboundDeps | undefined;
}

const runtimes = new WeakMap<ChannelContext, EmailRuntime>();

function runtimeOf(context: ChannelContext): EmailRuntime {
  let runtime = runtimes.get(context);
  if (!runtime) {
    runtime = {
      store: new EmailStore(context.db, context.internalSecret),
      sender: undefined,
      reader: undefined,
      inbound: undefined,
    };
    runtimes.set(context, runtime);
  }
  return runtime;
}

/** How a mail becomes a message in the queue: the allowlist and the people's routing decide whose agent answers it. */
function inboundDeps(context: ChannelContext, intake: IntakeDeps): MailInboundDeps {
  const runtime = runtimeOf(context);
  const email = context.config.email;
  return {
    store: runtime.store,
    authservId: email?.authservId,
    owner: context.config.owner?.email,
    allowed: async () => (await intake.allowlist.lists()).email,
    tellOwner: (text, key) => context.tellOwner(text, key, "(a mail waits for you)"),
    logger: context.logger.child("email"),
    take: async (mail: ParsedMail, sender: string, key: string) => {
      const taken = await takeMessage(intake, {
        source: "email",
        sender,
        isStop: mail.text.trim().toLowerCase() === "/stop" && mail.attachments.length === 0,
        idempotencyKey: `email:${key}`,
        stopKey: `stop:email:${key}`,
        text: mailMessage(mail),
        // Its files are kept only now, after the allowlist let it in, in the uploads of the agent it goes to.
        payload: async (agentId) => {
          const written = await storeFiles(
            mail.attachments.map((file) => ({
              data: file.content,
              filename: file.filename,
              mimeType: file.contentType,
            })),
            context.uploadsOf(agentId),
          );
          return {
            payload: { message: mailMessage(mail), attachments: written },
            discard: () => removeFiles(written),
          };
        },
      });
      return taken.kind === "accepted" || taken.kind === "stopped" ? "accepted" : "dropped";
    },
  };
}

/**
 * `POST /email/webhook` (public; the reference's wire: `Authorization: Bearer <webhookSecret>`,
 * body `{from, to, raw}` up to 10 MB). The mail is handled as one read by IMAP: the `From:` inside
 * `raw` counts, and only when the mailbox's server proved it; the body's `from` is the envelope's.
 */
function webhookHandler(context: ChannelContext, intake: IntakeDeps, secret: string): Handler {
  return async ({ req }) => {
    const header = req.headers.authorization ?? "";
    const given = header.startsWith("Bearer ") ? header.slice("Bearer ".length) : "";
    if (!safeEqual(given, secret)) throw new HttpError(401, "Unauthorized");
    // The raw mail is JSON-escaped inside the body: room for that beside the 10 MB it may have.
    const body = await readBody(req, Math.ceil(MAIL_LIMIT_BYTES * 1.1));
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString("utf8"));
    } catch {
      throw new HttpError(400, "Invalid payload: expected { from, to, raw }");
    }
    const { from, to, raw } = (parsed ?? {}) as Record<string, unknown>;
    if (typeof from !== "string" || typeof to !== "string" || typeof raw !== "string") {
      throw new HttpError(400, "Invalid payload: expected { from, to, raw }");
    }
    try {
      await handleMail(runtimeOf(context).inbound ?? inboundDeps(context, intake), Buffer.from(raw, "utf8"));
    } catch (error) {
      if (isDatabaseUnavailable(error)) throw new HttpError(503, "Not saved; send it again later");
      context.logger.error("could not take a mail", { error: errorMessage(error) });
      throw error;
    }
    return { json: { ok: true } };
  };
}

/**
 * Email: a mailbox read by IMAP (or mail posted to the reference's webhook) in, SMTP out, both in
 * the app. Identifiers are addresses, lower-case; the allowlist and `[owner] email` take patterns.
 */
export const emailChannel: ChannelDefinition = {
  name: "email",
  title: "Email",
  configured: (config) => config.email !== undefined,
  idDescription: "email address (ada@example.com)",
  isId: (text) => normalizeAddress(text) !== undefined,
  normalize: (identifier) => identifier.trim().toLowerCase(),
  maxAttachmentBytes: MAIL_LIMIT_BYTES,
  toolName: "send_email",
  mail: true,
  compose: composeWhole,
  plainText: (payload) => payload.text ?? "",
  sender(context) {
    const settings = context.config.email && smtpSettings(context.config.email);
    if (!settings) return undefined;
    const runtime = runtimeOf(context);
    runtime.sender ??= new SmtpSender(settings, runtime.store);
    return runtime.sender;
  },
  addRoutes(router, context, intake) {
    const runtime = runtimeOf(context);
    runtime.inbound = inboundDeps(context, intake);
    const secret = context.config.email?.webhookSecret;
    // Public: the mail service cannot log in; the handler checks the bearer secret.
    if (secret) router.post("/email/webhook", webhookHandler(context, intake, secret), { public: true });
    addEmailSettingsRoutes(router, {
      store: runtime.store,
      letThrough: (raw) => letThrough(runtime.inbound!, raw),
    });
  },
  start(context) {
    const runtime = runtimeOf(context);
    const settings = context.config.email && imapSettings(context.config.email);
    if (!settings || !runtime.inbound) return () => runtime.sender?.close();
    const inbound = runtime.inbound;
    runtime.reader = new ImapReader(
      settings,
      runtime.store,
      (raw) => handleMail(inbound, raw),
      context.logger.child("email"),
    );
    const stop = runtime.reader.start();
    return () => {
      stop();
      runtime.sender?.close();
    };
  },
  status: async (context) => {
    const email = context.config.email;
    const reader = runtimeOf(context).reader;
    const waiting = await runtimeOf(context)
      .store.waiting()
      .then((list) => list.length)
      .catch(() => 0);
    return {
      configured: true,
      inbound: email?.imapHost ? "imap" : email?.webhookSecret ? "webhook" : "none",
      outbound: Boolean(email?.smtpHost),
      ...(reader
        ? {
            connected: reader.state.connected,
            ...(reader.state.lastError ? { problem: reader.state.lastError } : {}),
            ...(reader.state.failingSince ? { failingSince: reader.state.failingSince.toISOString() } : {}),
            ...(reader.state.lastMailAt ? { lastMailAt: reader.state.lastMailAt.toISOString() } : {}),
          }
        : {}),
      waiting,
    };
  },
  check: (status) => {
    const { inbound, outbound, connected, problem, waiting } = status as unknown as {
      inbound: string;
      outbound: boolean;
      connected?: boolean;
      problem?: string;
      waiting: number;
    };
    if (inbound === "imap" && connected === false) {
      return {
        name: "email",
        state: "fail",
        detail: `the mailbox cannot be read${problem ? ` (${problem})` : ""}; it is tried again, with a growing wait`,
        fix: "Check [email] imapHost, imapPort, imapUser, imapPassword and imapTls, and that the server answers.",
      };
    }
    const parts = [
      inbound === "none" ? "nothing comes in (no imapHost or webhookSecret)" : `mail comes in by ${inbound}`,
      outbound ? "mail goes out by SMTP" : "nothing goes out (no smtpHost)",
      ...(waiting > 0 ? [`${waiting} mail(s) wait on the Email page`] : []),
    ];
    return {
      name: "email",
      state: inbound === "none" || !outbound ? "warn" : "ok",
      detail: parts.join("; "),
    };
  },
};
