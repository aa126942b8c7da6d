import { createHash, timingSafeEqual } from "node:crypto";

/** Compares two secrets in constant time (hashing first so lengths never leak). */
export function safeEqual(a: string, b: string): boolean {
  const left = createHash("sha256").update(a).digest();
  const right = createHash("sha256").update(b).digest();
  return timingSafeEqual(left, right);
}

/** True when the header is HTTP Basic auth whose password matches. The username is ignored. */
export function checkBasicPassword(header: string | undefined, password: string): boolean {
  return basicPasswordCheck(password)(header);
}

/**
 * `checkBasicPassword` for one password, whose digest is computed once: the owner's guard runs it
 * on every request.
 */
export function basicPasswordCheck(password: string): (header: string | undefined) => boolean {
  const expected = createHash("sha256").update(password).digest();
  return (header) => {
    if (!header) return false;
    const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
    if (!match?.[1]) return false;
    const decoded = Buffer.from(match[1], "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon === -1) return false;
    return timingSafeEqual(
      createHash("sha256")
        .update(decoded.slice(colon + 1))
        .digest(),
      expected,
    );
  };
}

/** True when the header is `Bearer <token>` and the token matches. */
export function checkBearer(header: string | undefined, secret: string): boolean {
  if (!header) return false;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) return false;
  return safeEqual(match[1], secret);
}

export function basicAuthHeader(password: string, username = "stavrobot"): string {
  return "Basic " + Buffer.from(`${username}:${password}`).toString("base64");
}
