import { basename } from "node:path";
import { Marked } from "marked";
import { createTransport, type Transporter } from "nodemailer";
import { errorMessage } from "@stavrobot/common";
import { escapeAttribute, escapeHtml } from "../../html.js";
import type { Delivery } from "../../delivery/store.js";
import type { ChannelSender, SendResult } from "../../delivery/worker.js";
import { isLoopbackHost, type EmailConfig } from "./config.js";
import type { EmailStore, MailThread } from "./store.js";

export interface SmtpSettings {
  host: string;
  port: number;
  user: string | undefined;
  password: string | undefined;
  fromAddress: string;
  /** The name beside the address (the assistant's). */
  fromName: string | undefined;
}

/**
 * A transport for `settings`: STARTTLS required unless the server is on this machine, TLS from
 * the start on 465, a login when a user is set. The sender and the Email page's check share it.
 */
export function smtpTransport(
  settings: Pick<SmtpSettings, "host" | "port" | "user" | "password">,
  timeouts: { connectionTimeout: number; greetingTimeout: number; socketTimeout?: number },
): Transporter {
  const implicitTls = settings.port === 465;
  return createTransport({
    host: settings.host,
    port: settings.port,
    secure: implicitTls,
    requireTLS: !implicitTls && !isLoopbackHost(settings.host),
    ...(settings.user ? { auth: { user: settings.user, pass: settings.password ?? "" } } : {}),
    ...timeouts,
  });
}

/** How long after a person's mail an answer to them still goes into its thread. */
const THREAD_DAYS = 14;

/** Markdown as a mail's HTML part: raw HTML in it shown as text, links only to the web and mail. */
const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    link({ href, tokens }) {
      const label = this.parser.parseInline(tokens);
      return /^(https?:|mailto:)/i.test(href) ? `<a href="${escapeAttribute(href)}">${label}</a>` : label;
    },
    image: ({ text }) => escapeHtml(text),
  },
});

export function markdownToMailHtml(markdown: string): string {
  const body = marked.parse(markdown, { async: false });
  return `<!doctype html><html><body style="font-family: sans-serif; line-height: 1.45">${body}</body></html>`;
}

/** "Re: x" for an answer to "x" (once, whatever the case it came in). */
export function replySubject(subject: string): string {
  const bare = subject.trim();
  if (!bare) return "Re: your message";
  return /^re:/i.test(bare) ? bare : `Re: ${bare}`;
}

/**
 * Sends one delivery as a mail through SMTP: STARTTLS is required unless the server is on this
 * machine (port 465 speaks TLS from the start), the From is fixed, the Markdown goes as text with
 * an HTML part beside it. A delivery without a subject of its own answers the last mail from its
 * recipient, in that mail's thread (In-Reply-To, References, "Re:").
 */
export class SmtpSender implements ChannelSender {
  private readonly transport: Transporter;

  constructor(
    private readonly settings: SmtpSettings,
    private readonly store: EmailStore,
  ) {
    this.transport = smtpTransport(settings, {
      connectionTimeout: 20_000,
      greetingTimeout: 20_000,
      socketTimeout: 60_000,
    });
  }

  async send(delivery: Delivery): Promise<SendResult> {
    const { payload, recipient } = delivery;
    const thread: MailThread | undefined = payload.subject
      ? undefined
      : await this.store.thread(recipient, THREAD_DAYS);
    const subject =
      payload.subject ?? (thread ? replySubject(thread.subject) : "A message from your assistant");
    const text = payload.text ?? "";
    try {
      await this.transport.sendMail({
        from: this.settings.fromName
          ? { name: this.settings.fromName, address: this.settings.fromAddress }
          : this.settings.fromAddress,
        to: recipient,
        subject,
        text,
        ...(text.trim() ? { html: markdownToMailHtml(text) } : {}),
        ...(thread ? { inReplyTo: thread.messageId, references: [...thread.references] } : {}),
        ...(payload.attachmentPath
          ? {
              attachments: [
                {
                  path: payload.attachmentPath,
                  filename: payload.attachmentName ?? basename(payload.attachmentPath),
                },
              ],
            }
          : {}),
      });
      return { ok: true };
    } catch (error) {
      return classify(error);
    }
  }

  close(): void {
    this.transport.close();
  }
}

/** A refusal (5xx, bad address) is given up; a server away or busy (4xx, no connection) is tried again. */
export function classify(error: unknown): SendResult {
  const { code, responseCode } = error as { code?: string; responseCode?: number };
  const message = errorMessage(error);
  if (code === "EAUTH") {
    return {
      ok: false,
      retry: true,
      channelDown: true,
      error: `the mail server refused the login (${message}): check [email] smtpUser and smtpPassword`,
    };
  }
  if (typeof responseCode === "number" && responseCode >= 500) {
    return { ok: false, retry: false, error: `the mail server refused this mail (${message})` };
  }
  if (code === "EENVELOPE" && responseCode === undefined) {
    return { ok: false, retry: false, error: `the mail could not be addressed (${message})` };
  }
  return {
    ok: false,
    retry: true,
    channelDown: typeof responseCode !== "number",
    error: `the mail server ${typeof responseCode === "number" ? "asked to try later" : "does not answer"} (${message})`,
  };
}

/** What the SMTP sender connects with, from `[email]`. */
export function smtpSettings(email: EmailConfig): SmtpSettings | undefined {
  if (!email.smtpHost || !email.fromAddress) return undefined;
  return {
    host: email.smtpHost,
    port: email.smtpPort,
    user: email.smtpUser,
    password: email.smtpPassword,
    fromAddress: email.fromAddress,
    fromName: undefined,
  };
}
