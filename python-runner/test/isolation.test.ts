import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import type { Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { SYSTEM_TOOL_PATH, listen } from "@stavrobot/common";
import type { TestPythonRunner } from "./helpers.js";
import {
  sandboxModes,
  isRoot,
  makeTempRoot,
  processesMatching,
  processesOf,
  startPythonRunner,
  uniqueMarker,
  writeUvShim,
} from "./helpers.js";

/**
 * A fork bomb whose every process stays alive and keeps forking, with `marker` in its command
 * line (the script runs it as `python3 -c`, so `pgrep -f` finds each copy).
 */
function forkBomb(marker: string): string {
  const bomb = `import os, time  # ${marker}\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)`;
  return `import subprocess, sys\nsubprocess.run([sys.executable, '-c', ${JSON.stringify(bomb)}])`;
}

/** Paths under `dir` whose last component is `name`. */
function filesUnder(dir: string, name: string): string[] {
  const entries = readdirSync(dir, { recursive: true, encoding: "utf8" });
  return entries.filter((entry) => entry === name || entry.endsWith(`/${name}`));
}

describe.runIf(isRoot).each(sandboxModes())("isolation of runs (%s sandbox)", (mode, plainSandbox) => {
  let runner: TestPythonRunner;
  let outside: string;
  let tcp: Server;
  let tcpPort: number;
  beforeAll(async () => {
    outside = makeTempRoot("python-runner-outside");
    runner = await startPythonRunner({
      plainSandbox,
      toolPath: `${writeUvShim(outside)}:${SYSTEM_TOOL_PATH}`,
      limits: { timeoutMs: 2_000 },
    });
    tcp = createServer((socket) => socket.end("hello from the host\n"));
    tcpPort = await listen(tcp as never, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await new Promise((resolve) => tcp.close(resolve));
    await runner.close();
    rmSync(outside, { recursive: true, force: true });
  });

  it("runs as the unprivileged run user with only the environment it is given", async () => {
    const uid = Number(execFileSync("id", ["-u", runner.user], { encoding: "utf8" }).trim());
    const code = "import os\nprint(os.getuid(), os.getgid() != 0)\nprint(sorted(os.environ))";
    const { output } = await runner.run({ code });
    const [ids, keys] = output.trim().split("\n");
    expect(ids).toBe(`${uid} True`);
    expect(keys).not.toMatch(/SECRET|STAVROBOT|VITEST|NODE/);
    expect(keys).toContain("'PATH'");
  });

  it("cannot read the app's configuration or the runner's state", async () => {
    const configDir = join(outside, "main");
    mkdirSync(configDir, { mode: 0o700 });
    chmodSync(configDir, 0o700);
    writeFileSync(join(configDir, "config.toml"), 'password = "OWNER-PASSWORD-123"\n', { mode: 0o600 });
    const code = [
      "import os",
      `for path in ['${configDir}/config.toml', '${configDir}', '${runner.stateDir}/runs']:`,
      "    try:",
      "        print(open(path).read() if os.path.isfile(path) else os.listdir(path))",
      "    except OSError as error:",
      "        print(type(error).__name__)",
    ].join("\n");
    const { output } = await runner.run({ code });
    expect(output).not.toContain("OWNER-PASSWORD");
    expect(output.trim().split("\n")).toEqual(
      mode === "namespaces"
        ? ["FileNotFoundError", "FileNotFoundError", "FileNotFoundError"]
        : ["PermissionError", "PermissionError", "PermissionError"],
    );
  });

  it("cannot see another run's files, even while it runs", async () => {
    const marker = uniqueMarker("secret");
    const slow = runner.run({
      code: "import time\ntime.sleep(1.5)\nprint(open('input/" + marker + ".txt').read())",
      files: [{ filename: `${marker}.txt`, data: Buffer.from("A-SECRET").toString("base64") }],
    });
    // The probe runs while the slow run's input file is in place.
    await vi.waitFor(() => expect(filesUnder(runner.root, `${marker}.txt`)).not.toEqual([]), 5_000);
    const probe = runner.run({
      code: [
        "import os",
        "found = []",
        `for top in ['/tmp', '${runner.root}', '${runner.stateDir}']:`,
        "    for dirpath, dirnames, filenames in os.walk(top):",
        `        found += [name for name in filenames if '${marker}' in name]`,
        "print(found, os.listdir('input'))",
      ].join("\n"),
    });
    expect((await slow).output).toBe("A-SECRET\n");
    expect((await probe).output).toBe("[] []\n");
  });

  it("leaves nothing for the next run", async () => {
    const marker = uniqueMarker("left");
    await runner.run({
      code: [
        "import os, tempfile",
        `open('output/${marker}.txt', 'w').write('x')`,
        `open('/tmp/${marker}', 'w').write('x')`,
        `open(os.path.join(tempfile.gettempdir(), '${marker}.tmp'), 'w').write('x')`,
        `open('${marker}.cwd', 'w').write('x')`,
      ].join("\n"),
    });
    const { output } = await runner.run({
      code: `import os, tempfile\nprint(sorted(os.listdir('.')), os.listdir('output'), os.listdir(tempfile.gettempdir()), os.path.exists('/tmp/${marker}'))`,
    });
    // Plain mode has no private /tmp: only the run's own directory is fresh there.
    expect(output).toBe(
      `['input', 'output', 'script.py', 'tmp'] [] [] ${mode === "namespaces" ? "False" : "True"}\n`,
    );
    rmSync(`/tmp/${marker}`, { force: true });
  });

  it("has no network without dependencies, and has it with them", async () => {
    const code = [
      "import socket",
      "try:",
      `    print(socket.create_connection(('127.0.0.1', ${tcpPort}), timeout=3).recv(100).decode().strip())`,
      "except OSError as error:",
      "    print('no network:', type(error).__name__)",
    ].join("\n");
    const without = (await runner.run({ code })).output;
    // Plain mode cannot take the network away (logged at start-up).
    expect(without).toMatch(mode === "namespaces" ? /^no network: / : /^hello from the host\n$/);
    expect((await runner.run({ code, dependencies: ["six"] })).output).toBe("hello from the host\n");
  });

  it("contains a fork bomb: the run ends, nothing of it survives, the service keeps answering", async () => {
    const marker = uniqueMarker("forkbomb");
    const started = Date.now();
    let settled = false;
    let most = 0;
    const bomb = runner.run({ code: forkBomb(marker) }).finally(() => (settled = true));
    await vi.waitFor(() => {
      most = Math.max(most, processesOf(runner.user).length);
      if (most <= 10 && !settled) throw new Error(`the fork bomb has ${most} processes so far`);
    }, 15_000);
    expect(most).toBeGreaterThan(10);
    expect((await fetch(`${runner.url}/health`)).status).toBe(200);
    const { output } = await bomb;
    expect(output).toMatch(/Process timed out after 2 seconds\.$/);
    expect(Date.now() - started).toBeLessThan(20_000);
    await vi.waitFor(() => expect(processesMatching(marker)).toEqual([]), 10_000);
    await vi.waitFor(() => expect(processesOf(runner.user)).toEqual([]), 10_000);
    expect((await runner.run({ code: "print('alive')" })).output).toBe("alive\n");
  });

  it("ends a process that left the run's session when the run ends", async () => {
    const marker = uniqueMarker("daemon");
    const code = [
      "import subprocess, time",
      `subprocess.Popen(['setsid', 'sh', '-c', 'sleep 60 # ${marker}'])`,
      "time.sleep(0.5)",
      "print('started')",
    ].join("\n");
    expect((await runner.run({ code })).output).toBe("started\n");
    await vi.waitFor(() => expect(processesMatching(marker)).toEqual([]), 10_000);
  });
});
