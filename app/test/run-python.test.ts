import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentToolResult } from "@mariozechner/pi-agent-core";
import { createServiceClient } from "@stavrobot/common";
import { freePort } from "@stavrobot/common/test-support";
import { createRunPythonTool } from "../src/tools/run-python.js";
// The real python-runner (its domain behind the service listener, on a loopback port).
import type { TestPythonRunner } from "../../python-runner/test/helpers.js";
import { SECRET, makeTempRoot, startPythonRunner } from "../../python-runner/test/helpers.js";

let base: string;
let filesDir: string;
let runner: TestPythonRunner;

function text(result: AgentToolResult<unknown>): string {
  return result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

function tool(url = runner.url) {
  return createRunPythonTool({
    pythonRunner: createServiceClient({ baseUrl: url, bearer: SECRET, retries: 0 }),
    filesDir,
  });
}

async function runPython(params: { code: string; dependencies?: string[]; files?: string[] }, url?: string) {
  return text(await tool(url).execute("call", params));
}

beforeAll(async () => {
  base = makeTempRoot("app-run-python");
  filesDir = join(base, "files");
  mkdirSync(join(filesDir, "uploads"), { recursive: true });
  writeFileSync(join(filesDir, "uploads", "numbers.csv"), "1,2,3\n4,5,6\n");
  runner = await startPythonRunner();
});

afterAll(async () => {
  await runner?.close();
  rmSync(base, { recursive: true, force: true });
});

describe("run_python against a real python-runner", () => {
  it("runs code and returns its output", async () => {
    expect(await runPython({ code: "print(6 * 7)" })).toBe("42\n");
    expect(await runPython({ code: "import sys\nsys.exit(2)" })).toBe("Exit code: 2.");
  });

  it("gives files from the files directory and saves the files the script writes", async () => {
    const code = [
      "rows = [line.split(',') for line in open('/tmp/run/input/numbers.csv').read().split()]",
      "total = sum(int(x) for row in rows for x in row)",
      "open('/tmp/run/output/total.txt', 'w').write(str(total))",
      "print('total', total)",
    ].join("\n");
    const out = await runPython({ code, files: ["uploads/numbers.csv"] });
    const saved = join(filesDir, "python", "total.txt");
    expect(out).toBe(`total 21\n\nOutput files:\n- ${saved} (2 bytes)`);
    expect(readFileSync(saved, "utf8")).toBe("21");
    // An absolute path inside the files directory works too, and the output directory starts empty.
    const again = await runPython({
      code: "print(open('input/numbers.csv').read().count(','))",
      files: [join(filesDir, "uploads", "numbers.csv")],
    });
    expect(again).toBe("4\n");
    expect(existsSync(saved)).toBe(false);
  });

  it("can take the previous run's output as input", async () => {
    await runPython({ code: "open('output/step1.txt', 'w').write('from step one')" });
    const out = await runPython({
      code: "print(open('input/step1.txt').read())",
      files: ["python/step1.txt"],
    });
    expect(out).toBe("from step one\n");
  });

  it("refuses files outside the files directory", async () => {
    writeFileSync(join(base, "config.toml"), 'password = "secret"\n');
    symlinkSync(join(base, "config.toml"), join(filesDir, "uploads", "link.toml"));
    for (const path of ["../config.toml", join(base, "config.toml"), "uploads/link.toml"]) {
      await expect(runPython({ code: "print(1)", files: [path] })).rejects.toThrow(
        /is not inside .*only files there/,
      );
    }
    await expect(runPython({ code: "print(1)", files: ["uploads/missing.txt"] })).rejects.toThrow(
      /File not found/,
    );
    await expect(runPython({ code: "print(1)", files: ["uploads"] })).rejects.toThrow(/not a regular file/);
  });

  it("relays the runner's refusals as a readable error", async () => {
    await expect(runPython({ code: "import numpy", dependencies: ["numpy"] })).rejects.toThrow(
      /HTTP 400\): Dependencies need uv, which is not installed/,
    );
    await expect(runPython({ code: "", dependencies: ['x"; import os'] })).rejects.toThrow(
      /HTTP 400\): Invalid request: dependencies\.0: must be a package requirement/,
    );
  });

  it("says the runner is unreachable when it is down", async () => {
    const port = await freePort();
    await expect(runPython({ code: "print(1)" }, `http://127.0.0.1:${port}`)).rejects.toThrow(
      /^The python runner is unreachable: POST http:\/\/127\.0\.0\.1:\d+\/run unreachable/,
    );
  });

  it("caps a huge output for the model", async () => {
    const out = await runPython({ code: "print('y' * 200000)" });
    expect(out.length).toBeLessThan(60 * 1024);
    expect(out).toMatch(
      /\[TRUNCATED: the result was 200001 bytes; .* Print less, or write the full result to a file\.\]$/,
    );
  });
});
