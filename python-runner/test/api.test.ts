import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SYSTEM_TOOL_PATH } from "@stavrobot/common";
import { namespacesHere } from "@stavrobot/common/test-support";
import type { TestPythonRunner } from "./helpers.js";
import { makeTempRoot, startPythonRunner, writeUvShim } from "./helpers.js";

const b64 = (text: string): string => Buffer.from(text).toString("base64");

describe("POST /run refuses bad requests", () => {
  let runner: TestPythonRunner;
  beforeAll(async () => {
    runner = await startPythonRunner();
  });
  afterAll(() => runner.close());

  it("needs the Bearer secret (and /health does not)", async () => {
    expect(
      (await runner.request("POST", "/run", { code: "print(1)" }, "wrong-secret-0123456789")).status,
    ).toBe(401);
    const anonymous = await fetch(`${runner.url}/run`, { method: "POST", body: "{}" });
    expect(anonymous.status).toBe(401);
    const health = await fetch(`${runner.url}/health`);
    expect(await health.json()).toMatchObject({
      status: "ok",
      sandbox: { mode: namespacesHere() ? "namespaces" : "plain" },
      uv: false,
    });
  });

  it.each([
    ["missing code", {}, /^Invalid request: code: /],
    ["code that is not a string", { code: 42 }, /^Invalid request: code: /],
    ["dependencies that are not a list", { code: "", dependencies: "numpy" }, /dependencies: /],
    ["a dependency that is not a string", { code: "", dependencies: [1] }, /dependencies\.0: /],
    [
      "a dependency that breaks the header",
      { code: "", dependencies: ['numpy"]\n# x'] },
      /dependencies\.0: must be a package requirement/,
    ],
    ["a dependency that is no requirement", { code: "", dependencies: ["-e ."] }, /dependencies\.0: /],
    ["files that are not a list", { code: "", files: "a.txt" }, /files: /],
    ["a file without data", { code: "", files: [{ filename: "a.txt" }] }, /files\.0\.data: /],
    ["a file that is a string", { code: "", files: ["a.txt"] }, /files\.0: /],
    [
      "data that is not base64",
      { code: "", files: [{ filename: "a.txt", data: "not base64!" }] },
      /files\.0\.data: must be base64/,
    ],
    [
      "a path as file name",
      { code: "", files: [{ filename: "../a.txt", data: "" }] },
      /files\.0\.filename: must be a plain file name/,
    ],
    ["an empty file name", { code: "", files: [{ filename: "", data: "" }] }, /files\.0\.filename: /],
    ["a dot file name", { code: "", files: [{ filename: "..", data: "" }] }, /files\.0\.filename: /],
    [
      "two files of one name",
      {
        code: "",
        files: [
          { filename: "a", data: "" },
          { filename: "a", data: "" },
        ],
      },
      /files: file names must be distinct/,
    ],
  ])("400 for %s", async (_label, body, message) => {
    const answer = await runner.request("POST", "/run", body);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatch(message);
  });

  it("400 for invalid JSON, 415 for a body not declared JSON", async () => {
    const invalid = await runner.request("POST", "/run", "{not json");
    expect(invalid).toMatchObject({ status: 400, body: { error: expect.stringMatching(/^Invalid JSON/) } });
    const text = await fetch(`${runner.url}/run`, {
      method: "POST",
      headers: { Authorization: "Bearer test-internal-secret-0123456789", "Content-Type": "text/plain" },
      body: JSON.stringify({ code: "print(1)" }),
    });
    expect(text.status).toBe(415);
  });

  it("413 for input files over 25 MB decoded", async () => {
    const big = Buffer.alloc(13 * 1024 * 1024, 1).toString("base64");
    const answer = await runner.request("POST", "/run", {
      code: "print('never')",
      files: [
        { filename: "a.bin", data: big },
        { filename: "b.bin", data: big },
      ],
    });
    expect(answer.status).toBe(413);
    expect(answer.body.error).toMatch(/Input files total \d+ bytes; at most 26214400/);
  });

  it("refuses dependencies clearly when uv is not installed", async () => {
    const answer = await runner.request("POST", "/run", { code: "import numpy", dependencies: ["numpy"] });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatch(
      /^Dependencies need uv, which is not installed where the python-runner runs/,
    );
    // Without dependencies, plain python3 runs the code.
    expect(await runner.run({ code: "import sys\nprint(sys.version_info[0])", dependencies: [] })).toEqual({
      output: "3\n",
      files: [],
    });
  });

  it("accepts input files and answers files as an empty list when there are none", async () => {
    const result = await runner.run({
      code: "print(open('input/a.txt').read())",
      files: [{ filename: "a.txt", data: b64("hi") }],
    });
    expect(result).toEqual({ output: "hi\n", files: [] });
  });
});

describe("with uv", () => {
  let runner: TestPythonRunner;
  let root: string;
  beforeAll(async () => {
    root = makeTempRoot("python-runner-uv");
    runner = await startPythonRunner({ toolPath: `${writeUvShim(root)}:${SYSTEM_TOOL_PATH}` });
  });
  afterAll(async () => {
    await runner.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("runs the script through uv with the dependencies in a PEP 723 header", async () => {
    const code = "import sys\nprint(''.join(open(sys.argv[0]).readlines()[:3]), end='')";
    const result = await runner.run({
      code,
      dependencies: ["numpy", "requests[socks]>=2.31", "pandas==2.*"],
    });
    expect(result.output).toBe(
      '# /// script\n# dependencies = ["numpy", "requests[socks]>=2.31", "pandas==2.*"]\n# ///\n',
    );
    const health = await fetch(`${runner.url}/health`);
    expect(await health.json()).toMatchObject({ uv: true });
  });

  it("leaves code without dependencies as it is", async () => {
    const code = "import sys\nprint(open(sys.argv[0]).read().startswith('import sys'))";
    expect((await runner.run({ code })).output).toBe("True\n");
  });

  it("gives uv its cache only for runs with dependencies, and no network without them", async () => {
    const code =
      "import os\nprint(os.environ.get('UV_CACHE_DIR'), os.environ.get('UV_NO_CACHE'), os.environ.get('UV_OFFLINE'))";
    expect((await runner.run({ code })).output).toBe("None 1 1\n");
    expect((await runner.run({ code, dependencies: ["six"] })).output).toBe("/cache/uv None None\n");
  });
});
