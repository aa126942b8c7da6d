import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import { describe, expect, it, vi } from "vitest";
import { silentLogger } from "../logger.js";
import {
  addSystemUser,
  ensureSystemUser,
  hasAccount,
  killUserProcesses,
  lookupSystemUser,
  removeSystemUser,
} from "./users.js";

const isRoot = process.getuid?.() === 0;

describe("system users", () => {
  it("are looked up in /etc/passwd by name and by uid", async () => {
    expect(await lookupSystemUser("root")).toEqual({ uid: 0, gid: 0 });
    expect(await lookupSystemUser(`nobody-${randomBytes(4).toString("hex")}`)).toBeUndefined();
    expect(await hasAccount(0)).toBe(true);
    expect(await hasAccount(2_000_000_123)).toBe(false);
  });
});

describe.runIf(isRoot)("system users (root)", () => {
  it("refuses a user that maps to root", async () => {
    await expect(ensureSystemUser("root", silentLogger)).rejects.toThrow(/maps to root; refusing/);
  });

  it("creates a user once, ends its processes and removes it", async () => {
    const name = `cmn_${randomBytes(4).toString("hex")}`;
    const owner = await ensureSystemUser(name, silentLogger);
    expect(owner.uid).toBeGreaterThan(0);
    expect(await ensureSystemUser(name, silentLogger)).toEqual(owner);
    const child = spawn("sleep", ["300"], { uid: owner.uid, gid: owner.gid, stdio: "ignore" });
    const exited = new Promise((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
    await vi.waitFor(() => expect(statSync(`/proc/${child.pid}`).uid).toBe(owner.uid));
    await killUserProcesses([owner.uid]);
    expect(await exited).toBe("SIGKILL");
    await removeSystemUser(name, silentLogger);
    expect(await lookupSystemUser(name)).toBeUndefined();
    await removeSystemUser(name, silentLogger);
  });

  it("adds an entry for a given uid without a group of its own", async () => {
    const uid = 2_000_000_000 + Math.floor(Math.random() * 1_000_000);
    const name = `cmn_u${uid}`;
    await addSystemUser(name, { uid });
    try {
      expect(await hasAccount(uid)).toBe(true);
      expect((await lookupSystemUser(name))?.uid).toBe(uid);
    } finally {
      await removeSystemUser(name);
    }
  });
});
