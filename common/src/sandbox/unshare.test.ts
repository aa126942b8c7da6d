import { rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { systemEntries } from "./mounts.js";
import { prepareUnshare } from "./unshare.js";

const isRoot = process.getuid?.() === 0;

describe("the unshare sandbox's shared files", () => {
  const made: string[] = [];
  afterEach(() => {
    for (const path of made.splice(0)) rmSync(path, { recursive: true, force: true });
  });

  it.runIf(isRoot)("are open to every run user even when the service's umask is 077", () => {
    // The app runs with umask 077; `cp -a` gives each run's root the skeleton's own mode, so a
    // skeleton written 700 would shut every user but root out of its whole file system.
    const previous = process.umask(0o077);
    try {
      // A system list of its own: a skeleton this test writes, not the one other tests share.
      const system = [
        ...systemEntries(),
        {
          kind: "bind" as const,
          source: `/nonexistent-${process.pid}-${Date.now()}`,
          target: "/x",
          optional: true,
        },
      ];
      const base = prepareUnshare(system);
      if (typeof base === "string") throw new Error(base);
      made.push(base.skeleton, base.fstab);
      const mode = (path: string) => statSync(join(base.skeleton, path)).mode & 0o7777;
      expect(mode("")).toBe(0o755);
      expect(mode("dev")).toBe(0o755);
      expect(mode("dev/pts")).toBe(0o755);
      expect(mode("proc")).toBe(0o755);
      expect(mode("tmp")).toBe(0o1777);
    } finally {
      process.umask(previous);
    }
  });
});
