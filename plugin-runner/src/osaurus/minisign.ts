import { createHash, createPublicKey, verify } from "node:crypto";
import type { KeyObject } from "node:crypto";

/** A minisign public key: its 8-byte id and the Ed25519 key. */
export interface MinisignKey {
  id: string;
  key: KeyObject;
}

/**
 * A minisign public key from its base64 line (`RW…`) or the whole `.pub` file (the line after the
 * `untrusted comment:`). Throws naming what is wrong.
 */
export function parseMinisignKey(text: string): MinisignKey {
  const line = text
    .split(/\r?\n/)
    .map((part) => part.trim())
    .find((part) => part.length > 0 && !part.startsWith("untrusted comment:"));
  const raw = Buffer.from(line ?? "", "base64");
  if (raw.length !== 42 || raw.subarray(0, 2).toString("latin1") !== "Ed") {
    throw new Error(
      'a minisign public key is the base64 of 42 bytes starting with "Ed" (a line starting RW)',
    );
  }
  const key = createPublicKey({
    key: { kty: "OKP", crv: "Ed25519", x: raw.subarray(10).toString("base64url") },
    format: "jwk",
  });
  return { id: raw.subarray(2, 10).toString("hex"), key };
}

/**
 * Checks a minisign signature (`.minisig` text) of `data` against the trusted keys: the key id must
 * be one of theirs, the signature valid (`Ed` over the data itself, or the prehashed `ED` over its
 * BLAKE2b-512), and the global signature over the signature and trusted comment valid too. Throws
 * with the reason; answers the trusted comment.
 */
export function verifyMinisign(data: Buffer, signature: string, keys: readonly MinisignKey[]): string {
  const lines = signature.split(/\r?\n/);
  if (
    lines.length < 4 ||
    !lines[0]?.startsWith("untrusted comment:") ||
    !lines[2]?.startsWith("trusted comment: ")
  ) {
    throw new Error("the signature is not in minisign's format");
  }
  const sig = Buffer.from(lines[1]?.trim() ?? "", "base64");
  if (sig.length !== 74) throw new Error("the signature is not in minisign's format");
  const algorithm = sig.subarray(0, 2).toString("latin1");
  if (algorithm !== "Ed" && algorithm !== "ED") throw new Error(`unknown signature algorithm "${algorithm}"`);
  const id = sig.subarray(2, 10).toString("hex");
  const key = keys.find((candidate) => candidate.id === id);
  if (!key) throw new Error(`it was signed with key ${id.toUpperCase()}, which is not a trusted key`);
  const signed = algorithm === "ED" ? createHash("blake2b512").update(data).digest() : data;
  const bytes = sig.subarray(10);
  if (!verify(null, signed, key.key, bytes)) throw new Error("the signature does not match the file");
  const trusted = (lines[2] ?? "").slice("trusted comment: ".length);
  const global = Buffer.from(lines[3]?.trim() ?? "", "base64");
  if (
    global.length !== 64 ||
    !verify(null, Buffer.concat([bytes, Buffer.from(trusted, "utf8")]), key.key, global)
  ) {
    throw new Error("the signature's trusted comment does not match its global signature");
  }
  return trusted;
}
