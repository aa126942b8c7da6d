import { createHash } from "node:crypto";
import type { Logger } from "@stavrobot/common";
import { addressMatches, isGlob } from "./address.js";
import { proveSender } from "./auth.js";
import { parseMail, type ParsedMail } from "./parse.js";
import type { EmailStore } from "./store.js";

/** The largest mail taken, as the reference's webhook takes (10 MB). */
export const MAIL_LIMIT_BYTES = 10 * 1024 * 1024;

export type Handled =
  /** Given to the queue (an agent answers it). */
  | "accepted"
  /** From an address allowed, but its sender not proven: it waits for the owner. */
  | "waiting"
  /** From nobody allowed, without a sender, too large, or refused by the queue: nothing kept. */
  | "dropped"
  /** Handled before (the same Message-ID). */
  | "duplicate";

export interface MailInboundDeps {
  store: EmailStore;
  /** The authserv-id of the mailbox's own server (`[email] authservId`). */
  authservId: string | undefined;
  /** The owner's address or pattern (`[owner] email`). */
  owner: string | undefined;
  /** The email allowlist's entries (addresses and patterns), as the settings page keeps them. */
  allowed: () => Promise<string[]>;
  /**
   * Gives a mail to the queue as `source: "email"` from `sender` (the allowlist and the people's
   * routing decide whose agent answers); "dropped" when nobody does.
   */
  take: (mail: ParsedMail, sender: string, key: string) => Promise<"accepted" | "dropped">;
  /** Tells the owner something once per key (a mail waits for them). */
  tellOwner: (text: string, key: string) => Promise<void>;
  logger: Logger;
}

/** The name a mail is known by: its Message-ID, or a hash of it when it has none. */
export function mailKey(mail: ParsedMail, raw: Buffer): string {
  return mail.messageId ?? `sha256:${createHash("sha256").update(raw).digest("hex")}`;
}

/**
 * One mail, from IMAP or the webhook: handled once (by Message-ID), from an allowed address only,
 * and counted as its `From:` only when the mailbox's server proved that sender. A mail from an
 * allowed address that is not proven never reaches an agent on its own: it waits for the owner
 * (unless the owner lets that exact address through always; never the owner's own address, and
 * never through a pattern).
 */
export async function handleMail(deps: MailInboundDeps, raw: Buffer): Promise<Handled> {
  const { store, logger } = deps;
  if (raw.length > MAIL_LIMIT_BYTES) {
    logger.warn("dropped a mail larger than 10 MB", { bytes: raw.length });
    return "dropped";
  }
  const mail = await parseMail(raw);
  const key = mailKey(mail, raw);
  if (await store.seen(key)) return "duplicate";
  const from = mail.from;
  const ownerMatch = from !== undefined && deps.owner !== undefined && addressMatches(deps.owner, from);
  const entries =
    from === undefined ? [] : (await deps.allowed()).filter((entry) => addressMatches(entry, from));
  if (from === undefined || (!ownerMatch && entries.length === 0)) {
    logger.info("dropped a mail from an address that is not allowed", { from: from ?? "(none)" });
    await store.markSeen(key);
    return "dropped";
  }
  const proof = proveSender(mail.authenticationResults, deps.authservId, from);
  if (!proof.proven) {
    const exactEntry = entries.some((entry) => !isGlob(entry));
    if (ownerMatch || !exactEntry || !(await store.unprovenAllowed(from))) {
      const added = await store.addWaiting({
        messageId: key,
        sender: from,
        subject: mail.subject,
        reason: proof.reason,
        raw,
      });
      if (added) {
        await deps.tellOwner(
          `A mail from ${from}${mail.subject ? ` ("${mail.subject}")` : ""} waits for you: its sender is not proven (${proof.reason}). ` +
            "Let it through once or always, or dismiss it, on the Email page of the web admin.",
          `email-waiting:${key}`,
        );
      }
      await store.markSeen(key);
      logger.info("a mail whose sender is not proven waits for the owner", { from, reason: proof.reason });
      return "waiting";
    }
  }
  const taken = await deps.take(mail, from, key);
  if (taken === "accepted") await rememberThread(store, from, mail);
  await store.markSeen(key);
  return taken;
}

/** A mail the owner let through from the waiting list: given to the queue as its sender's. */
export async function letThrough(deps: MailInboundDeps, raw: Buffer): Promise<"accepted" | "dropped"> {
  const mail = await parseMail(raw);
  if (!mail.from) return "dropped";
  const taken = await deps.take(mail, mail.from, mailKey(mail, raw));
  if (taken === "accepted") await rememberThread(deps.store, mail.from, mail);
  return taken;
}

async function rememberThread(store: EmailStore, from: string, mail: ParsedMail): Promise<void> {
  if (!mail.messageId) return;
  await store.rememberThread(from, {
    messageId: mail.messageId,
    references: [...mail.references.filter((id) => id !== mail.messageId), mail.messageId].slice(-20),
    subject: mail.subject,
  });
}

/** What the model reads of a mail: its subject, then its text (the attachments come as files). */
export function mailMessage(mail: ParsedMail): string {
  return [mail.subject ? `Subject: ${mail.subject}` : undefined, mail.text].filter(Boolean).join("\n\n");
}
