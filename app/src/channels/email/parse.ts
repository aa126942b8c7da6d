import { simpleParser, type AddressObject } from "mailparser";
import { htmlToText } from "../../tools/html-text.js";
import { normalizeAddress } from "./address.js";

/** The most of a mail's text the model is given; the rest is cut with a note. */
export const MAIL_TEXT_LIMIT = 20_000;

export interface MailAttachment {
  filename: string;
  contentType: string;
  content: Buffer;
}

/** A mail as the channel reads it. */
export interface ParsedMail {
  /** The `From:` address, lower-case; undefined when it has none that parses. */
  from: string | undefined;
  fromName: string | undefined;
  to: string[];
  replyTo: string[];
  subject: string;
  messageId: string | undefined;
  inReplyTo: string | undefined;
  references: string[];
  date: Date | undefined;
  /** What the model reads: the text part (or the HTML part as text), quotes and signature trimmed, capped. */
  text: string;
  /** Every `Authentication-Results` header's value, topmost first. */
  authenticationResults: string[];
  attachments: MailAttachment[];
}

function addresses(field: AddressObject | AddressObject[] | undefined): { address: string; name?: string }[] {
  const objects = field === undefined ? [] : Array.isArray(field) ? field : [field];
  const out: { address: string; name?: string }[] = [];
  for (const object of objects) {
    for (const entry of object.value) {
      const address = entry.address ? normalizeAddress(entry.address) : undefined;
      if (address) out.push({ address, ...(entry.name ? { name: entry.name } : {}) });
    }
  }
  return out;
}

/** A header line's value: what follows the first colon, unfolded. */
function headerValue(line: string): string {
  return line
    .slice(line.indexOf(":") + 1)
    .replace(/\r?\n[ \t]+/g, " ")
    .trim();
}

/** Parses a raw RFC 5322 mail. */
export async function parseMail(raw: Buffer | string): Promise<ParsedMail> {
  const mail = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true });
  const from = addresses(mail.from)[0];
  const body = mail.text?.trim() ? mail.text : mail.html ? htmlToText(mail.html) : "";
  const references = Array.isArray(mail.references)
    ? mail.references
    : mail.references
      ? mail.references.split(/\s+/).filter(Boolean)
      : [];
  return {
    from: from?.address,
    fromName: from?.name,
    to: addresses(mail.to).map((entry) => entry.address),
    replyTo: addresses(mail.replyTo).map((entry) => entry.address),
    subject: mail.subject?.trim() ?? "",
    messageId: mail.messageId,
    inReplyTo: mail.inReplyTo,
    references,
    date: mail.date,
    text: capText(trimReply(body)),
    authenticationResults: mail.headerLines
      .filter((line) => line.key === "authentication-results")
      .map((line) => headerValue(line.line)),
    attachments: mail.attachments
      // Images the HTML part shows inline are part of its look, not files sent.
      .filter((attachment) => !attachment.related)
      .map((attachment, index) => ({
        filename: attachment.filename ?? `attachment-${index + 1}`,
        contentType: attachment.contentType,
        content: attachment.content,
      })),
  };
}

/** The lines that start a quote of the mail being answered ("On Mon, Ada wrote:", Outlook's header block). */
const QUOTE_HEADER = [
  /^On .{1,300}wrote:\s*$/,
  /^-{2,}\s*Original Message\s*-{2,}\s*$/i,
  /^-{2,}\s*Forwarded message\s*-{2,}\s*$/i,
  /^From: .+$/,
];

/**
 * The new part of a reply: a signature (after a line `-- `) and the quote of the earlier mail (a
 * "… wrote:" line or Outlook's "From:" block followed by the rest, or a trailing block of `>`
 * lines) are left out. A mail that is nothing but a quote is kept whole.
 */
export function trimReply(text: string): string {
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  let end = lines.length;
  const signature = lines.findIndex((line) => line === "-- " || line === "--");
  if (signature >= 0) end = signature;
  for (let i = 0; i < end; i++) {
    const line = lines[i]!.trim();
    if (QUOTE_HEADER.some((pattern) => pattern.test(line))) {
      // "From:" starts a quote only with Outlook's block after it (Sent:/To:/Subject:).
      if (
        line.startsWith("From:") &&
        !lines.slice(i + 1, i + 5).some((next) => /^(Sent|Date|To|Subject):/.test(next.trim()))
      ) {
        continue;
      }
      end = i;
      break;
    }
  }
  while (end > 0 && (lines[end - 1]!.startsWith(">") || lines[end - 1]!.trim() === "")) end--;
  const kept = lines.slice(0, end).join("\n").trim();
  return kept || text.trim();
}

function capText(text: string): string {
  if (text.length <= MAIL_TEXT_LIMIT) return text;
  return `${text.slice(0, MAIL_TEXT_LIMIT)}\n\n[The rest of this mail, ${text.length - MAIL_TEXT_LIMIT} characters, was cut.]`;
}
