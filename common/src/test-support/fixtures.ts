import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, chmodSync, constants, existsSync, mkdtempSync, readdirSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "../logger.js";
import { Sandbox } from "../sandbox/sandbox.js";

/** Root runs untrusted code as other users; tests of that run only as root. */
export const isRoot = process.getuid?.() === 0;

let modes: (readonly ["namespaces" | "plain", boolean])[] | undefined;

/**
 * The ways the sandbox can isolate untrusted code on this machine, as `[mode, plainSandbox]`: a
 * service's contract must hold in each. Namespaces need bubblewrap, or root for util-linux
 * unshare; without either, the tests of that mode are skipped, saying so.
 */
export function sandboxModes(): readonly (readonly ["namespaces" | "plain", boolean])[] {
  if (!modes) {
    const probe = Sandbox.create({ logger: silentLogger });
    const namespaces = requires(
      `the namespaces sandbox (${probe.status.reason ?? "unavailable"}): needs bubblewrap, or root for util-linux unshare`,
      probe.mode === "namespaces",
    );
    modes = [...(namespaces ? [["namespaces", false] as const] : []), ["plain", true] as const];
  }
  return modes;
}

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

/** Whether a program is on this process's PATH. */
export function onPath(program: string): boolean {
  return (process.env.PATH ?? "").split(":").some((dir) => {
    try {
      accessSync(join(dir, program), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * What this machine has of the optional system packages the tests can use. A test needing one
 * that is missing is skipped, and the reason is printed once per test file.
 */
export function requires(what: string, available: boolean): boolean {
  if (!available) console.warn(`[skipped] ${what}`);
  return available;
}

/** The programs the sandbox looks for, bubblewrap aside. */
const SANDBOX_HELPERS = [
  "setpriv",
  "prlimit",
  "unshare",
  "sh",
  "mount",
  "umount",
  "pivot_root",
  "cp",
  "mkdir",
  "ip",
];

/**
 * A PATH with the programs the sandbox uses from a machine without bubblewrap: the sandbox's own
 * search finds no `bwrap` there, as on a fresh machine that never installed the package.
 */
export function pathWithoutBubblewrap(): string {
  const dir = mkdtempSync(join(tmpdir(), "no-bwrap-"));
  chmodSync(dir, 0o755);
  for (const program of SANDBOX_HELPERS) {
    for (const bin of (process.env.PATH ?? "/usr/bin:/bin").split(":")) {
      const found = join(bin, program);
      if (!existsSync(found)) continue;
      symlinkSync(found, join(dir, program));
      break;
    }
  }
  return dir;
}

/** Whether the sandbox makes namespaces on this machine (see `sandboxModes`). */
export function namespacesHere(): boolean {
  return sandboxModes().some(([mode]) => mode === "namespaces");
}

/**
 * This machine's PATH as one directory of links, without the named programs: what a machine that
 * never installed their packages finds (the first of each name on PATH, as a shell would).
 */
export function machinePathWithout(programs: readonly string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "machine-path-"));
  chmodSync(dir, 0o755);
  const taken = new Set(programs);
  for (const bin of (process.env.PATH ?? "/usr/bin:/bin").split(":")) {
    let names: string[];
    try {
      names = readdirSync(bin);
    } catch {
      continue;
    }
    for (const name of names) {
      if (taken.has(name)) continue;
      taken.add(name);
      symlinkSync(join(bin, name), join(dir, name));
    }
  }
  return dir;
}
