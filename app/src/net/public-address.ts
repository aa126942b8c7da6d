import { isIPv4, isIPv6 } from "node:net";

/**
 * Tells public internet addresses from everything a fetch on the owner's behalf must not reach:
 * the machine itself, its LAN, cloud metadata endpoints, and addresses that are not unicast.
 * Hand-written (no dependency) because the rules are few and must be easy to audit.
 */

interface Range {
  /** Address bytes (4 or 16) of the network. */
  bytes: number[];
  prefix: number;
  kind: string;
}

const v4 = (text: string, prefix: number, kind: string): Range => ({
  bytes: text.split(".").map(Number),
  prefix,
  kind,
});

const IPV4_BLOCKED: Range[] = [
  v4("0.0.0.0", 8, "unspecified"),
  v4("10.0.0.0", 8, "private"),
  v4("100.64.0.0", 10, "shared (CGNAT)"),
  v4("127.0.0.0", 8, "loopback"),
  v4("169.254.0.0", 16, "link-local"),
  v4("172.16.0.0", 12, "private"),
  v4("192.0.0.0", 24, "reserved"),
  v4("192.168.0.0", 16, "private"),
  v4("198.18.0.0", 15, "reserved"),
  v4("224.0.0.0", 4, "multicast"),
  v4("240.0.0.0", 4, "reserved or broadcast"),
];

const v6 = (text: string, prefix: number, kind: string): Range => ({
  bytes: ipv6Bytes(text) ?? [],
  prefix,
  kind,
});

const IPV6_BLOCKED: Range[] = [
  v6("::", 128, "unspecified"),
  v6("::1", 128, "loopback"),
  v6("fc00::", 7, "private"),
  v6("fec0::", 10, "private (site-local)"),
  v6("fe80::", 10, "link-local"),
  v6("ff00::", 8, "multicast"),
];

/**
 * IPv6 forms that carry an IPv4 address, which is what such a packet reaches in the end:
 * IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4
 * (2002::/16, address in bytes 2..5).
 */
function embeddedIpv4(bytes: number[]): number[] | undefined {
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12);
  if (zeros(0, 12)) return bytes.slice(12);
  if (bytes[0] === 0x00 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zeros(4, 12)) {
    return bytes.slice(12);
  }
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return bytes.slice(2, 6);
  return undefined;
}

/**
 * Why `address` (an IP literal, IPv6 with or without brackets or zone) must not be fetched, or
 * undefined when it is a public address. Anything that is not an IP address is refused too.
 */
export function nonPublicReason(address: string): string | undefined {
  const ip = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  if (isIPv4(ip)) return match(ip.split(".").map(Number), IPV4_BLOCKED);
  const bytes = isIPv6(ip) ? ipv6Bytes(ip) : undefined;
  if (!bytes) return "not an IP address";
  // Check the two special IPv6 addresses first: "::" and "::1" would otherwise pass as IPv4-compatible.
  const own = match(bytes, IPV6_BLOCKED);
  if (own) return own;
  const inner = embeddedIpv4(bytes);
  if (inner) {
    const reason = match(inner, IPV4_BLOCKED);
    return reason ? `${reason} (IPv4 inside IPv6)` : undefined;
  }
  return undefined;
}

function match(bytes: number[], ranges: Range[]): string | undefined {
  return ranges.find((range) => inPrefix(bytes, range))?.kind;
}

function inPrefix(bytes: number[], range: Range): boolean {
  if (bytes.length !== range.bytes.length) return false;
  for (let bit = 0; bit < range.prefix; bit += 8) {
    const left = Math.min(8, range.prefix - bit);
    const mask = (0xff << (8 - left)) & 0xff;
    const index = bit / 8;
    if (((bytes[index] ?? 0) & mask) !== ((range.bytes[index] ?? 0) & mask)) return false;
  }
  return true;
}

/** The 16 bytes of an IPv6 address (the caller has checked it with `isIPv6`). */
export function ipv6Bytes(ip: string): number[] | undefined {
  // A dotted IPv4 tail ("::ffff:10.0.0.1") is two 16-bit groups.
  const text = ip.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_all, a, b, c, d) => {
    const group = (high: string, low: string) => ((Number(high) << 8) | Number(low)).toString(16);
    return `${group(a, b)}:${group(c, d)}`;
  });
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const groups = (part: string | undefined) => (part ? part.split(":").map((g) => parseInt(g, 16)) : []);
  const left = groups(halves[0]);
  const right = groups(halves[1]);
  const missing = 8 - left.length - right.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const words = [...left, ...new Array<number>(missing).fill(0), ...right];
  if (words.some((w) => !Number.isInteger(w) || w < 0 || w > 0xffff)) return undefined;
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

/** `dns/promises` `lookup` with `{all: true}`; injectable so tests can fake DNS answers. */
export type LookupAll = (
  hostname: string,
  options: { all: true },
) => Promise<{ address: string; family: number }[]>;

export interface CheckedAddress {
  address: string;
  family: 4 | 6;
}

/** A fetch refused or failed for a reason the caller should read as it is. */
export class FetchRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FetchRefusedError";
  }
}

const HINT = "web_fetch only reads public internet addresses.";

/**
 * Resolves a URL's host name and returns the address to connect to, refusing names and
 * addresses that are not public. Every address the name resolves to must be public: a name that
 * answers with one public and one private address is refused, since either could be used.
 */
export async function resolvePublicAddress(
  hostname: string,
  options: { lookup: LookupAll; allowPrivateNetworks: boolean },
): Promise<CheckedAddress> {
  const host = hostname.replace(/^\[|\]$/g, "");
  const literal = isIPv4(host) ? 4 : isIPv6(host) ? 6 : 0;
  if (literal) {
    const reason = options.allowPrivateNetworks ? undefined : nonPublicReason(host);
    if (reason) throw new FetchRefusedError(`${host} is not a public address (${reason}); ${HINT}`);
    return { address: host, family: literal };
  }
  const lower = host.toLowerCase().replace(/\.$/, "");
  if (!options.allowPrivateNetworks && (lower === "localhost" || lower.endsWith(".localhost"))) {
    throw new FetchRefusedError(`${host} is not a public address (this machine); ${HINT}`);
  }
  let answers: { address: string; family: number }[];
  try {
    answers = await options.lookup(host, { all: true });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new FetchRefusedError(
      `Could not resolve ${host} (${typeof code === "string" ? code : "DNS error"}).`,
    );
  }
  const first = answers[0];
  if (!first) throw new FetchRefusedError(`Could not resolve ${host} (no addresses).`);
  for (const answer of options.allowPrivateNetworks ? [] : answers) {
    const reason = nonPublicReason(answer.address);
    if (reason)
      throw new FetchRefusedError(
        `${host} resolves to ${answer.address}, which is not a public address (${reason}); ${HINT}`,
      );
  }
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}
