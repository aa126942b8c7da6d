import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestPythonRunner } from "./helpers.js";
import { sandboxModes, startPythonRunner } from "./helpers.js";

describe.each(sandboxModes())("the output text (%s sandbox)", (_mode, plainSandbox) => {
  let runner: TestPythonRunner;
  beforeAll(async () => {
    runner = await startPythonRunner({ plainSandbox, limits: { timeoutMs: 1_500 } });
  });
  afterAll(() => runner.close());

  it("is stdout when that is all there is", async () => {
    expect(await runner.run({ code: "print('hello')" })).toEqual({ output: "hello\n", files: [] });
  });

  it("adds stderr after a line of its own", async () => {
    const code = "import sys\nprint('out')\nprint('oops', file=sys.stderr)";
    expect((await runner.run({ code })).output).toBe("out\n\nstderr:\noops\n");
    const onlyStderr = await runner.run({ code: "import sys\nsys.stderr.write('warn')" });
    expect(onlyStderr.output).toBe("stderr:\nwarn");
  });

  it("ends with the exit code when the script fails", async () => {
    expect((await runner.run({ code: "import sys\nsys.exit(3)" })).output).toBe("Exit code: 3.");
    const raised = (await runner.run({ code: "print('before')\nraise ValueError('bad value')" })).output;
    expect(raised).toMatch(/^before\n\nstderr:\nTraceback[\s\S]*ValueError: bad value\n\nExit code: 1\.$/);
  });

  it("says so when the script printed nothing", async () => {
    expect((await runner.run({ code: "x = 1" })).output).toBe("Script produced no output.");
    expect((await runner.run({ code: "" })).output).toBe("Script produced no output.");
  });

  it("kills an infinite loop at the timeout, keeping what it printed before", async () => {
    const started = Date.now();
    const { output } = await runner.run({ code: "print('looping')\nwhile True:\n    pass" });
    expect(output).toBe("looping\n\nProcess timed out after 1.5 seconds.");
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("caps stdout and says so", async () => {
    const { output } = await runner.run({ code: "import sys\nsys.stdout.write('x' * (3 * 1024 * 1024))" });
    expect(output.startsWith("x".repeat(1024 * 1024) + "\n[stdout truncated after 1 MB]")).toBe(true);
  });

  it("replaces text the database cannot store", async () => {
    const { output } = await runner.run({ code: "import sys\nsys.stdout.buffer.write(b'a\\x00b\\xff')" });
    expect(output).toBe("a\uFFFDb\uFFFD");
  });

  it("reads and writes UTF-8 whatever the machine's locale", async () => {
    const { output } = await runner.run({ code: "print('héllo ✓')" });
    expect(output).toBe("héllo ✓\n");
  });
});
