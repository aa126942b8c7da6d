import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Root runs untrusted code as other users; tests of that run only as root. */
export const isRoot = process.getuid?.() === 0;

/** Both ways the sandbox isolates untrusted code: a service's contract must hold in each. */
export const SANDBOX_MODES = [
  ["namespaces", false],
  ["plain", true],
] as const;

/** A temp directory other users can pass through (mkdtemp makes 0700 directories). */
export function makeTempRoot(prefix: string): string {
  const root = mkdtempSync(join(tmpdir(), `${prefix}-`));
  chmodSync(root, 0o711);
  return root;
}

/** `<prefix>-<6 hex digits>`, for names tests share with others (plugins and their users are global). */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString("hex")}`;
}

/**
 * The live processes (anywhere on the machine) whose command line contains `marker`, as
 * "pid command line" (pgrep -a -f; it does not list itself).
 */
export function processesMatching(marker: string): string[] {
  try {
    const found = execFileSync("pgrep", ["-a", "-f", marker], { encoding: "utf8" });
    return found.trim().split("\n").filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches.
  }
}
