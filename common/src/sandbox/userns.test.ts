import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { requires } from "../test-support/fixtures.js";
import { which } from "./mounts.js";
import { holdUserNamespace, identityMap, releaseUserNamespace } from "./userns.js";

const isRoot = process.getuid?.() === 0;
const path = process.env.PATH ?? "/usr/bin:/bin";
const unshare = which("unshare", path);
const nsenter = which("nsenter", path);
const canHold = requires(
  "a user namespace of the service's own: needs root, util-linux unshare and nsenter",
  isRoot && unshare !== undefined && nsenter !== undefined,
);

const dir = mkdtempSync(join(tmpdir(), "userns-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("identityMap", () => {
  it("maps every id range of a namespace to itself, whatever it maps to outside", () => {
    const file = join(dir, "uid_map");
    writeFileSync(file, "         0     100000      65536\n     70000     300000         10\n");
    expect(identityMap(file)).toBe("0 0 65536\n70000 70000 10\n");
  });
});

describe.runIf(canHold)("holdUserNamespace", () => {
  it("holds a new user namespace that maps this process's users and groups to themselves", () => {
    const namespace = holdUserNamespace(unshare as string, "/bin/sh");
    if (typeof namespace === "string") throw new Error(namespace);
    try {
      const held = `/proc/${process.pid}/fd/${namespace.fd}`;
      const maps = execFileSync(nsenter as string, [
        `--user=${held}`,
        "--",
        "/bin/sh",
        "-c",
        "cat /proc/self/uid_map /proc/self/gid_map; id -u",
      ]).toString();
      const own = (file: string) => readFileSync(file, "utf8").trim().split(/\s+/);
      const [uidFrom, , uidCount] = own("/proc/self/uid_map");
      const [gidFrom, , gidCount] = own("/proc/self/gid_map");
      expect(maps.trim().split(/\s+/)).toEqual([uidFrom, uidFrom, uidCount, gidFrom, gidFrom, gidCount, "0"]);
      // A namespace of its own, not this process's.
      expect(execFileSync("readlink", [held]).toString()).not.toBe(
        execFileSync("readlink", ["/proc/self/ns/user"]).toString(),
      );
    } finally {
      releaseUserNamespace(namespace);
    }
  });

  it("says why when util-linux unshare cannot create one", () => {
    expect(holdUserNamespace("/nonexistent/unshare", "/bin/sh")).toMatch(
      /^util-linux unshare could not be started: /,
    );
  });
});
