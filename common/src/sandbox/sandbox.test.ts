import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { pathWithoutBubblewrap, requires } from "../test-support/fixtures.js";
import { silentLogger } from "../logger.js";
import { Sandbox, runtimeMounts, which } from "./sandbox.js";

const isRoot = process.getuid?.() === 0;
const hasBwrap = which("bwrap", process.env.PATH ?? "") !== undefined;
/**
 * The namespace launchers this machine can test: bubblewrap, (as root) bubblewrap in a user
 * namespace of the service's own (what a container without CAP_SYS_ADMIN gets), and (as root)
 * util-linux unshare.
 */
const launchers = [
  ...(requires("namespaces by bubblewrap: bubblewrap is not installed", hasBwrap)
    ? ["bubblewrap" as const]
    : []),
  ...(requires("namespaces by bubblewrap in a user namespace: needs bubblewrap and root", hasBwrap && isRoot)
    ? ["bubblewrap in a user namespace" as const]
    : []),
  ...(requires("namespaces by util-linux unshare: needs root", isRoot) ? ["unshare" as const] : []),
];
type Launcher = (typeof launchers)[number];

function createFor(launcher: Launcher): Sandbox {
  if (launcher === "unshare") return Sandbox.create({ logger: silentLogger, path: pathWithoutBubblewrap() });
  if (launcher === "bubblewrap") return Sandbox.create({ logger: silentLogger });
  return Sandbox.create({ logger: silentLogger, userNamespaceOnly: true });
}

const REASONS: Record<Launcher, string | undefined> = {
  bubblewrap: undefined,
  "bubblewrap in a user namespace":
    "bubblewrap was asked to run in a user namespace; it makes them in a user namespace of this service's own",
  unshare: "bubblewrap is not installed",
};
const base = {
  timeoutMs: 10_000,
  stdoutLimitBytes: 64 * 1024,
  stderrLimitBytes: 64 * 1024,
  killGraceMs: 200,
};
const env = { PATH: "/usr/bin:/bin" };
const nobody = { uid: 65534, gid: 65534 };

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "sandbox-test-"));
  chmodSync(root, 0o700);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** True while some process's command line contains `marker`. */
function running(marker: string): boolean {
  try {
    execFileSync("pgrep", ["-f", marker], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe.each(launchers)("namespaces mode (%s)", (launcher) => {
  const sandbox = createFor(launcher);
  const tool = launcher === "unshare" ? "unshare" : "bubblewrap";
  // Each launcher's files apart: the same tests run once per launcher.
  let own: string;
  beforeAll(() => {
    own = mkdtempSync(join(root, "launcher-"));
  });

  it("is chosen when it works here, saying what it does not protect", () => {
    expect(sandbox.status).toMatchObject({ mode: "namespaces", tool, users: isRoot });
    expect(sandbox.status.reason).toBe(REASONS[launcher]);
    expect(sandbox.status.unprotected).toContain(
      "no system-call filter: the whole kernel interface is reachable",
    );
    expect(sandbox.status.unprotected.join("\n")).not.toMatch(/network still has it/);
  });

  it("shows only the system, the runtimes and the given mounts; /tmp is private", async () => {
    const secretDir = join(own, "secret");
    mkdirSync(secretDir);
    writeFileSync(join(secretDir, "key"), "hunter2");
    const shared = join(own, "shared");
    mkdirSync(shared);
    const result = await sandbox.run({
      ...base,
      command: "/bin/sh",
      args: [
        "-c",
        `cat ${join(secretDir, "key")} 2>&1; ls /root 2>&1; echo made > /tmp/private; echo out > /work/out; cat /work/in`,
      ],
      cwd: "/work",
      env,
      mounts: [{ source: shared, target: "/work", writable: true }],
    });
    writeFileSync(join(shared, "in"), "");
    expect(result.stdout).toMatch(/No such file or directory/);
    expect(result.stdout).not.toContain("hunter2");
    expect(readFileSync(join(shared, "out"), "utf8")).toBe("out\n");
    expect(existsSync("/tmp/private")).toBe(false);
  });

  it.runIf(isRoot)("runs as the given user with no capabilities and no way to regain them", async () => {
    const result = await sandbox.run({
      ...base,
      command: "/bin/sh",
      args: ["-c", "id -u; id -G; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status"],
      cwd: "/",
      env,
      user: nobody,
    });
    expect(result.stdout).toBe("65534\n65534\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n");
  });

  it.runIf(isRoot)("lets its user reach a mount whose directory here is closed to that user", async () => {
    // A checkout under root's home (mode 700): the plugin's own directory is its user's, but the
    // user cannot pass through the home on this machine's paths. Inside the sandbox it need not.
    const closed = join(own, "closed-home");
    const plugin = join(closed, "data", "plugins", "p");
    mkdirSync(plugin, { recursive: true, mode: 0o700 });
    chmodSync(closed, 0o700);
    writeFileSync(join(plugin, "tool.sh"), "#!/bin/sh\necho ran as $(id -u)\n", { mode: 0o755 });
    execFileSync("chown", ["-R", `${nobody.uid}:${nobody.gid}`, plugin]);
    const prompt = join(closed, "prompt.md");
    writeFileSync(prompt, "a prompt\n", { mode: 0o644 });
    const result = await sandbox.run({
      ...base,
      command: "/plugins/p/tool.sh",
      cwd: "/plugins/p",
      env,
      user: nobody,
      mounts: [
        { source: plugin, target: "/plugins/p", writable: true },
        { source: prompt, target: "/prompts/system.md" },
      ],
    });
    expect(result.stderr).toBe("");
    expect(result.stdout).toBe("ran as 65534\n");
    const file = await sandbox.run({
      ...base,
      command: "/bin/sh",
      args: ["-c", "cat /prompts/system.md; echo x >> /prompts/system.md"],
      cwd: "/",
      env,
      user: nobody,
      mounts: [{ source: prompt, target: "/prompts/system.md" }],
    });
    expect(file.stdout).toBe("a prompt\n");
    expect(file.stderr).toMatch(/Read-only file system|Permission denied/);
  });

  it("removes the network on request", async () => {
    const server = createServer((socket) => socket.end("hello\n"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    const port = (server.address() as { port: number }).port;
    const probe = `exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3`;
    try {
      const open = await sandbox.run({ ...base, command: "/bin/bash", args: ["-c", probe], cwd: "/", env });
      expect(open.stdout).toBe("hello\n");
      const closed = await sandbox.run({
        ...base,
        command: "/bin/bash",
        args: ["-c", probe],
        cwd: "/",
        env,
        network: false,
      });
      expect(closed.exitCode).not.toBe(0);
      expect(closed.stdout).toBe("");
    } finally {
      server.close();
    }
  });

  it("leaves nothing running after the run, even a process that left its session", async () => {
    const marker = `sandbox-detached-${process.pid}`;
    const result = await sandbox.run({
      ...base,
      command: "/bin/sh",
      args: ["-c", `setsid sh -c 'exec -a ${marker} sleep 300' & echo started`],
      cwd: "/",
      env,
    });
    expect(result.stdout).toBe("started\n");
    await vi.waitFor(() => expect(running(marker)).toBe(false));
  });

  it("ends the whole tree on timeout", async () => {
    const marker = `sandbox-timeout-${process.pid}`;
    const result = await sandbox.run({
      ...base,
      timeoutMs: 500,
      command: "/bin/sh",
      args: ["-c", `sh -c 'exec -a ${marker} sleep 300' & sleep 300`],
      cwd: "/",
      env,
    });
    expect(result.timedOut).toBe(true);
    await vi.waitFor(() => expect(running(marker)).toBe(false));
  });

  it.runIf(isRoot)("applies resource limits: a fork bomb and an oversized file are stopped", async () => {
    const bomb = await sandbox.run({
      ...base,
      timeoutMs: 5_000,
      command: "/bin/bash",
      args: ["-c", "for i in $(seq 100); do sleep 2 & done 2>&1 | head -1; echo done"],
      cwd: "/",
      env,
      user: nobody,
      limits: { processes: 20 },
    });
    expect(bomb.stdout).toMatch(/Resource temporarily unavailable|retry: /i);
    const big = await sandbox.run({
      ...base,
      command: "/bin/sh",
      args: ["-c", "head -c 200000 /dev/zero > /tmp/big; echo rc=$?"],
      cwd: "/",
      env,
      limits: { fileSizeBytes: 100_000 },
    });
    expect(big.stdout).toMatch(/rc=[1-9]/);
  });

  it("reports a process killed by a signal as such", async () => {
    const result = await sandbox.run({
      ...base,
      command: "/bin/sh",
      args: ["-c", "kill -9 $$"],
      cwd: "/",
      env,
    });
    expect(result.signal).toBe("SIGKILL");
  });
});

describe.runIf(launchers.includes("unshare"))("namespaces by util-linux unshare", () => {
  const sandbox = Sandbox.create({ logger: silentLogger, path: pathWithoutBubblewrap() });

  it("refuses a mount path its script could not carry", async () => {
    const result = await sandbox.run({
      ...base,
      command: "/bin/true",
      cwd: "/",
      env,
      mounts: [{ source: root, target: "/a\nb" }],
    });
    expect(result.spawnError).toMatch(/cannot have a newline/);
  });

  it("falls back to plain mode, saying why, when it is not root", () => {
    const sandbox = Sandbox.create({ logger: silentLogger, path: "/nonexistent" });
    expect(sandbox.status).toMatchObject({ mode: "plain", reason: "setpriv (util-linux) was not found" });
  });
});

describe("plain mode", () => {
  const sandbox = Sandbox.create({ logger: silentLogger, disableNamespaces: true });

  it("says why it is plain", () => {
    expect(sandbox.status).toMatchObject({
      mode: "plain",
      users: isRoot,
      reason: "disabled by configuration",
    });
    expect(sandbox.status.unprotected).toContain("a run meant to have no network still has it");
    expect(sandbox.enforcesNetworkRemoval).toBe(false);
  });

  it.runIf(isRoot)("still switches user, applies limits and times out", async () => {
    const who = await sandbox.run({
      ...base,
      command: "/bin/sh",
      args: ["-c", "id -u; ulimit -f"],
      cwd: "/",
      env,
      user: nobody,
      limits: { fileSizeBytes: 1024 * 512 },
    });
    expect(who.stdout).toBe("65534\n1024\n");
    const slow = await sandbox.run({
      ...base,
      timeoutMs: 300,
      command: "/bin/sleep",
      args: ["30"],
      cwd: "/",
      env,
    });
    expect(slow.timedOut).toBe(true);
  });
});

describe("runtimeMounts", () => {
  it("mounts the PATH's runtime directories; a home tool brings its root, ~/.local/bin comes alone", () => {
    const home = join(root, "home");
    for (const dir of [".pyenv/shims", ".local/bin", ".local/share/keyring", "tools/bin"]) {
      mkdirSync(join(home, dir), { recursive: true });
    }
    const path = [
      join(home, ".pyenv/shims"),
      join(home, ".local/bin"),
      join(home, "tools/bin"),
      "/usr/bin",
      "/bin",
      join(home, "missing"),
      "relative/bin",
    ].join(":");
    expect(runtimeMounts(path, home).map((m) => m.source)).toEqual([
      join(home, ".pyenv"),
      join(home, ".local/bin"),
      join(home, "tools"),
    ]);
  });
});
