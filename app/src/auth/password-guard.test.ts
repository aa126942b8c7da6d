import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { DomainError, basicAuthHeader, createLogger } from "@stavrobot/common";
import { FIRST_HOLD_MS, FORGET_AFTER_MS, MAX_HOLD_MS, PasswordGuard, addressKey } from "./password-guard.js";

const PASSWORD = "the-owners-password";

function setUp() {
  let now = 1_000_000;
  const lines: string[] = [];
  const guard = new PasswordGuard({
    password: PASSWORD,
    logger: createLogger("auth", "info", (line) => lines.push(line)),
    now: () => now,
  });
  const request = (address: string, password: string | undefined) =>
    ({
      method: "GET",
      url: "/usage?x=1",
      headers: password === undefined ? {} : { authorization: basicAuthHeader(password, "owner") },
      socket: { remoteAddress: address },
    }) as unknown as IncomingMessage;
  /** What the guard says: true, false, or the seconds to wait it answered 429 with. */
  const ask = (address: string, password: string | undefined): boolean | number => {
    try {
      return guard.check(request(address, password));
    } catch (error) {
      expect(error).toBeInstanceOf(DomainError);
      expect((error as DomainError).kind).toBe("rate-limited");
      return (error as DomainError).details?.retryAfterSeconds as number;
    }
  };
  return { ask, lines, advance: (ms: number) => (now += ms) };
}

describe("the owner's password, wrong guesses slowed down per address", () => {
  it("holds an address back after five wrong passwords, right ones included, for twice as long each time", () => {
    const { ask, advance } = setUp();
    for (let guess = 1; guess <= 4; guess++) expect(ask("203.0.113.7", `guess-${guess}`)).toBe(false);
    // The fifth is answered, and holds the address back.
    expect(ask("203.0.113.7", "guess-5")).toBe(false);
    expect(ask("203.0.113.7", "guess-6")).toBe(FIRST_HOLD_MS / 1000);
    // Held back, even the right password is not checked.
    expect(ask("203.0.113.7", PASSWORD)).toBe(FIRST_HOLD_MS / 1000);
    advance(FIRST_HOLD_MS - 10_000);
    expect(ask("203.0.113.7", PASSWORD)).toBe(10);
    // Another address is not held back, and a request without a password is no guess.
    expect(ask("198.51.100.2", PASSWORD)).toBe(true);
    expect(ask("203.0.113.7", undefined)).toBe(false);
    advance(10_000);
    // One more wrong one: twice as long.
    expect(ask("203.0.113.7", "guess-7")).toBe(false);
    expect(ask("203.0.113.7", PASSWORD)).toBe((2 * FIRST_HOLD_MS) / 1000);
    // It grows to fifteen minutes and no further.
    for (let round = 0; round < 8; round++) {
      advance(MAX_HOLD_MS);
      expect(ask("203.0.113.7", "again")).toBe(false);
    }
    expect(ask("203.0.113.7", PASSWORD)).toBe(MAX_HOLD_MS / 1000);
    // Once the hold is over, the right password gets in and forgets the failures.
    advance(MAX_HOLD_MS);
    expect(ask("203.0.113.7", PASSWORD)).toBe(true);
    for (let guess = 1; guess <= 4; guess++) expect(ask("203.0.113.7", `typo-${guess}`)).toBe(false);
    expect(ask("203.0.113.7", PASSWORD)).toBe(true);
  });

  it("forgets an address's wrong passwords an hour after the last", () => {
    const { ask, advance } = setUp();
    for (let guess = 1; guess <= 4; guess++) expect(ask("203.0.113.7", `guess-${guess}`)).toBe(false);
    advance(FORGET_AFTER_MS + 1);
    for (let guess = 1; guess <= 4; guess++) expect(ask("203.0.113.7", `guess-${guess}`)).toBe(false);
    expect(ask("203.0.113.7", PASSWORD)).toBe(true);
  });

  it("counts an IPv6 address by its /64, and an IPv4 address mapped into IPv6 as itself", () => {
    const { ask } = setUp();
    for (let guess = 1; guess <= 5; guess++) expect(ask(`2001:db8:1:2::${guess}`, "wrong")).toBe(false);
    expect(ask("2001:db8:1:2:ffff:1:2:3", PASSWORD)).toBe(30);
    expect(ask("2001:db8:1:3::1", PASSWORD)).toBe(true);
    for (let guess = 1; guess <= 5; guess++) expect(ask("::ffff:192.0.2.1", "wrong")).toBe(false);
    expect(ask("192.0.2.1", PASSWORD)).toBe(30);
    expect(addressKey("2001:0db8:0001:0002:0:0:0:1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
    expect(addressKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
  });

  it("logs each wrong password with the address, never what was sent", () => {
    const { ask, lines } = setUp();
    for (let guess = 1; guess <= 5; guess++) ask("203.0.113.7", `secret-guess-${guess}`);
    ask("203.0.113.7", PASSWORD);
    expect(lines).toHaveLength(5);
    for (const line of lines) {
      expect(line).toContain("wrong password");
      expect(line).toContain("203.0.113.7");
      expect(line).toContain("/usage");
      expect(line).not.toMatch(/secret-guess|the-owners-password|owner:|Basic /);
    }
    expect(lines[4]).toMatch(/heldBackSeconds.{0,3}30/);
  });
});
