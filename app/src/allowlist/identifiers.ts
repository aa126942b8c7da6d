import { ALLOWLIST_SERVICES, type AllowlistService } from "./allowlist.js";

const E164 = /^\+[1-9]\d{1,14}$/;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
/** Zero-width and direction marks that come along when a number is copied from a contact card. */
const INVISIBLE = /[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]/g;

/** What each service's identifiers look like, for the refusal. */
const EXPECTED: Record<AllowlistService, string> = {
  telegram: "a Telegram chat id is a number, such as 123456789",
  signal: "a Signal number is in international form, such as +15555550123",
  whatsapp: "a WhatsApp number is in international form, such as +15555550123",
  email: "an email address, such as ada@example.com",
};

/** An identifier that is not one of its service's; the message says what one looks like. */
export class IdentifierError extends Error {
  override name = "IdentifierError";
  constructor(
    readonly service: AllowlistService,
    readonly entry: unknown,
  ) {
    super(`Invalid ${service} identifier ${JSON.stringify(entry)}: ${EXPECTED[service]}.`);
  }
}

export function isAllowlistService(service: string): service is AllowlistService {
  return (ALLOWLIST_SERVICES as readonly string[]).includes(service);
}

/** Marks copied along with a number or address removed, and the ends trimmed. */
export function cleanIdentifier(text: string): string {
  return text.replace(INVISIBLE, "").trim();
}

/**
 * One person's identifier on `service` as it is stored (`*`, anyone, only where `wildcard`), or
 * an IdentifierError saying what it should look like. The allowlist and the People page (and
 * `manage_interlocutors`) check identifiers here, so neither keeps what the other refuses.
 */
export function parseIdentifier(
  service: AllowlistService,
  entry: unknown,
  options: { wildcard: boolean } = { wildcard: false },
): string {
  const invalid = () => new IdentifierError(service, entry);
  if (service === "telegram" && typeof entry === "number") {
    if (!Number.isSafeInteger(entry)) throw invalid();
    return String(entry);
  }
  if (typeof entry !== "string") throw invalid();
  const text = cleanIdentifier(entry);
  if (text === "*") {
    if (options.wildcard) return "*";
    throw invalid();
  }
  if (service === "telegram") {
    if (!/^-?\d{1,20}$/.test(text)) throw invalid();
    // Telegram ids compare as decimal strings.
    return String(BigInt(text));
  }
  if (service === "email") {
    const email = text.toLowerCase();
    if (!EMAIL.test(email) || email.length > 320) throw invalid();
    return email;
  }
  if (!E164.test(text)) throw invalid();
  return text;
}
