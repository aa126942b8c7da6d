import type { IncomingMessage } from "node:http";
import { isIPv6 } from "node:net";
import { DomainError, basicPasswordCheck, type Logger } from "@stavrobot/common";

/** Wrong passwords an address may send before it is held back. */
export const FREE_FAILURES = 5;
/** How long an address is held back after its fifth wrong password; each further one doubles it. */
export const FIRST_HOLD_MS = 30_000;
export const MAX_HOLD_MS = 15 * 60_000;
/** An address's wrong passwords are forgotten this long after its last one. */
export const FORGET_AFTER_MS = 60 * 60_000;
/** Addresses remembered at most (the oldest are forgotten first). */
const MAX_ADDRESSES = 10_000;

interface Failures {
  count: number;
  last: number;
  /** Until when a password from this address is not even checked. */
  heldUntil: number;
}

export interface PasswordGuardOptions {
  password: string;
  logger: Logger;
  now?: () => number;
}

/**
 * The owner's password on the external port, with wrong guesses slowed down per client address:
 * each wrong password is logged with the address (never with what was sent), and after
 * `FREE_FAILURES` of them within the hour the address is held back, 30 s and then twice as long at
 * each further wrong password (up to 15 min): while held back, any request of it that carries a
 * password, right or wrong, is refused with 429 and `Retry-After`, unchecked. A request without one
 * (a browser's first, before it asks) is not a guess and is answered as before. The right password
 * forgets the address's failures.
 *
 * The address is the connection's: the app has no setting that says which proxy to believe, so
 * `X-Forwarded-For` is not read. Behind a reverse proxy every client shares the proxy's address.
 * IPv6 addresses count by their /64 network, which one machine usually has whole.
 */
export class PasswordGuard {
  private readonly matches: (header: string | undefined) => boolean;
  private readonly now: () => number;
  private readonly failures = new Map<string, Failures>();
  /** Requests found to carry the owner's password. */
  private readonly owners = new WeakSet<IncomingMessage>();

  constructor(private readonly options: PasswordGuardOptions) {
    this.matches = basicPasswordCheck(options.password);
    this.now = options.now ?? Date.now;
  }

  /**
   * True when the request carries the owner's password; false when it carries none or a wrong
   * one. Throws a `rate-limited` DomainError while its address is held back.
   */
  check(req: IncomingMessage): boolean {
    const header = req.headers.authorization;
    if (header === undefined) return false;
    const address = clientAddress(req);
    const key = addressKey(address);
    const now = this.now();
    const known = this.failures.get(key);
    if (known && now - known.last > FORGET_AFTER_MS) this.failures.delete(key);
    const entry = this.failures.get(key);
    if (entry && now < entry.heldUntil) throw held(entry.heldUntil - now);
    if (this.matches(header)) {
      if (entry) this.failures.delete(key);
      this.owners.add(req);
      return true;
    }
    const count = (entry?.count ?? 0) + 1;
    const hold =
      count >= FREE_FAILURES ? Math.min(MAX_HOLD_MS, FIRST_HOLD_MS * 2 ** (count - FREE_FAILURES)) : 0;
    this.remember(key, { count, last: now, heldUntil: now + hold });
    this.options.logger.warn("wrong password", {
      address,
      method: req.method,
      path: (req.url ?? "/").split("?")[0],
      failures: count,
      ...(hold > 0 ? { heldBackSeconds: Math.ceil(hold / 1000) } : {}),
    });
    return false;
  }

  /** Whether `check` found this request to carry the owner's password (it is not checked again). */
  checked(req: IncomingMessage): boolean {
    return this.owners.has(req);
  }

  private remember(key: string, entry: Failures): void {
    // Re-inserted, so the map's order is the order of last failures: the oldest go first.
    this.failures.delete(key);
    this.failures.set(key, entry);
    for (const oldest of this.failures.keys()) {
      if (this.failures.size <= MAX_ADDRESSES) break;
      this.failures.delete(oldest);
    }
  }
}

function held(ms: number): DomainError {
  const seconds = Math.ceil(ms / 1000);
  return new DomainError(
    "rate-limited",
    `Too many wrong passwords from this address: try again in ${seconds} s. The password is in config.toml (password = "...").`,
    { reason: "too-many-wrong-passwords", retryAfterSeconds: seconds },
  );
}

/** The connection's address, an IPv4 one mapped into IPv6 given as IPv4. */
export function clientAddress(req: IncomingMessage): string {
  const address = req.socket.remoteAddress ?? "unknown";
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

/** What failures are counted under: an IPv4 address, or an IPv6 address's /64 network. */
export function addressKey(address: string): string {
  if (!isIPv6(address)) return address;
  const [head = "", tail] = address.split("%")[0]!.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return `${groups
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(":")}::/64`;
}
