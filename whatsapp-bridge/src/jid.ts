import { E164_PATTERN } from "@stavrobot/common";

/** `15555550123@s.whatsapp.net` (or with `:device`) → `+15555550123`; undefined for anything else. */
export function jidToE164(jid: string): string | undefined {
  const match = /^(\d+)(?::\d+)?@s\.whatsapp\.net$/.exec(jid);
  if (!match) return undefined;
  const number = `+${match[1]}`;
  return E164_PATTERN.test(number) ? number : undefined;
}

/** `+15555550123` → `15555550123@s.whatsapp.net`. */
export function e164ToJid(number: string): string {
  return `${number.replace(/^\+/, "")}@s.whatsapp.net`;
}

export const isLid = (jid: string): boolean => jid.endsWith("@lid");
