import { domainOf } from "./address.js";

/**
 * Whether a mail's `From:` is proven, from the `Authentication-Results` header (RFC 8601) that the
 * mailbox's own server added. Anyone can write such a header into a mail they send, so only one
 * whose authserv-id is the one configured for the mailbox's server (`[email] authservId`) counts,
 * and of those only the topmost: a receiving server adds its header above what the mail brought.
 * The sender counts as its address when DMARC passed for the `From:` domain, or SPF or DKIM passed
 * for a domain aligned with it (the same domain, or one a subdomain of the other).
 */

export interface MethodResult {
  method: string;
  result: string;
  /** `ptype.property` → value, e.g. `header.from` → `example.org`. */
  properties: Record<string, string>;
}

export interface AuthenticationResults {
  authservId: string;
  results: MethodResult[];
}

export type SenderProof =
  | { proven: true; by: string }
  | {
      proven: false;
      /** Why not, in words for the owner's waiting list. */
      reason: string;
    };

/** Comments in parentheses (which may nest) removed; quoted strings kept. */
function withoutComments(text: string): string {
  let out = "";
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (quoted) {
      out += char;
      if (char === "\\" && i + 1 < text.length) out += text[++i];
      else if (char === '"') quoted = false;
    } else if (char === '"' && depth === 0) {
      quoted = true;
      out += char;
    } else if (char === "(") depth++;
    else if (char === ")" && depth > 0) depth--;
    else if (depth === 0) out += char;
  }
  return out;
}

/** One header's value parsed; undefined when it has no authserv-id. */
export function parseAuthenticationResults(value: string): AuthenticationResults | undefined {
  const parts = withoutComments(value.replace(/\r?\n[ \t]+/g, " "))
    .split(";")
    .map((part) => part.trim());
  const head = parts.shift()?.split(/\s+/)[0];
  if (!head) return undefined;
  const results: MethodResult[] = [];
  for (const part of parts) {
    const tokens = part.match(/[^\s=]+=(?:"(?:[^"\\]|\\.)*"|[^\s]*)/g) ?? [];
    const first = tokens.shift();
    if (!first) continue;
    const [method, result] = first.split("=");
    if (!method || !result || method.includes(".")) continue;
    const properties: Record<string, string> = {};
    for (const token of tokens) {
      const at = token.indexOf("=");
      const key = token.slice(0, at).toLowerCase();
      let val = token.slice(at + 1);
      if (val.startsWith('"')) val = val.slice(1, -1).replace(/\\(.)/g, "$1");
      if (key.includes(".")) properties[key] = val;
    }
    results.push({ method: method.toLowerCase().split("/")[0]!, result: result.toLowerCase(), properties });
  }
  return { authservId: head.toLowerCase(), results };
}

/** Whether two domains are aligned: the same, or one a subdomain of the other. */
export function aligned(a: string, b: string): boolean {
  const x = a.toLowerCase().replace(/\.$/, "");
  const y = b.toLowerCase().replace(/\.$/, "");
  return x === y || x.endsWith(`.${y}`) || y.endsWith(`.${x}`);
}

/**
 * Whether `from` is proven by the headers (their values, topmost first) for a mailbox whose server
 * says `authservId`. Without an authserv-id configured nothing is proven.
 */
export function proveSender(
  headers: readonly string[],
  authservId: string | undefined,
  from: string,
): SenderProof {
  if (!authservId) {
    return {
      proven: false,
      reason: "no [email] authservId is configured, so no Authentication-Results header is trusted",
    };
  }
  const wanted = authservId.trim().toLowerCase();
  const ours = headers.map(parseAuthenticationResults).find((parsed) => parsed?.authservId === wanted);
  if (!ours) return { proven: false, reason: `the mail has no Authentication-Results header from ${wanted}` };
  const fromDomain = domainOf(from);
  const passed = (method: string) => ours.results.filter((r) => r.method === method && r.result === "pass");
  for (const dmarc of passed("dmarc")) {
    const domain = dmarc.properties["header.from"];
    // DMARC's own alignment is with the From: domain, which the header names.
    if (domain !== undefined && domain.toLowerCase() === fromDomain) return { proven: true, by: "dmarc" };
  }
  for (const dkim of passed("dkim")) {
    const domain = dkim.properties["header.d"] ?? domainOfIdentity(dkim.properties["header.i"]);
    if (domain && aligned(domain, fromDomain)) return { proven: true, by: "dkim" };
  }
  for (const spf of passed("spf")) {
    const domain = domainOfIdentity(spf.properties["smtp.mailfrom"]);
    if (domain && aligned(domain, fromDomain)) return { proven: true, by: "spf" };
  }
  const seen = ours.results.map((r) => `${r.method}=${r.result}`).join(", ") || "no results";
  return { proven: false, reason: `${wanted} found no passing check aligned with ${fromDomain} (${seen})` };
}

/** `user@example.org` or `example.org` → `example.org`. */
function domainOfIdentity(value: string | undefined): string | undefined {
  if (!value) return undefined;
  return value.includes("@") ? domainOf(value) : value.toLowerCase();
}
