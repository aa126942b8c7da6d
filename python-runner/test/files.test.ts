import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestPythonRunner } from "./helpers.js";
import { sandboxModes, isRoot, startPythonRunner } from "./helpers.js";

const b64 = (text: string): string => Buffer.from(text).toString("base64");
const text = (data: string): string => Buffer.from(data, "base64").toString("utf8");

describe.each(sandboxModes())("files in and out (%s sandbox)", (_mode, plainSandbox) => {
  let runner: TestPythonRunner;
  beforeAll(async () => {
    runner = await startPythonRunner({ plainSandbox });
  });
  afterAll(() => runner.close());

  it("gives input files in input/ and returns what the script writes to output/", async () => {
    const code = [
      "import os",
      "print(os.getcwd() == os.environ['HOME'])",
      "print(sorted(os.listdir('input')))",
      "data = open('input/numbers.csv').read()",
      "total = sum(int(x) for x in data.split(','))",
      "open('output/total.txt', 'w').write(str(total))",
      "open('output/copy.bin', 'wb').write(open('input/raw.bin', 'rb').read())",
    ].join("\n");
    const raw = Buffer.from([0, 1, 2, 255]);
    const result = await runner.run({
      code,
      files: [
        { filename: "numbers.csv", data: b64("1,2,3") },
        { filename: "raw.bin", data: raw.toString("base64") },
      ],
    });
    expect(result.output).toBe("True\n['numbers.csv', 'raw.bin']\n");
    expect(result.files.map((file) => file.filename)).toEqual(["copy.bin", "total.txt"]);
    expect(text(result.files[1]?.data ?? "")).toBe("6");
    expect(Buffer.from(result.files[0]?.data ?? "", "base64")).toEqual(raw);
  });

  it("sees the run directory at /tmp/run in namespaces mode", async () => {
    const { output } = await runner.run({ code: "import os\nprint(os.getcwd())" });
    expect(output).toBe(`${plainSandbox ? runner.plainRunDir : "/tmp/run"}\n`);
  });

  it("ignores symlinks, directories and special files in output/", async () => {
    const code = [
      "import os",
      "os.symlink('/etc/passwd', 'output/passwd')",
      "os.symlink('../input/secret.txt', 'output/secret-link')",
      "os.mkdir('output/subdir')",
      "open('output/subdir/inner.txt', 'w').write('inner')",
      "os.mkfifo('output/fifo')",
      "os.link('input/secret.txt', 'output/hardlink')",
      "open('output/real.txt', 'w').write('real')",
    ].join("\n");
    const result = await runner.run({ code, files: [{ filename: "secret.txt", data: b64("s3cret") }] });
    expect(result.output).toBe("Script produced no output.");
    // A hard link could name a file the run user may not read: refused when runs switch users.
    const names = result.files.map((file) => file.filename);
    expect(names).toEqual(isRoot ? ["real.txt"] : ["hardlink", "real.txt"]);
    expect(JSON.stringify(result.files)).not.toContain(b64("root:"));
  });

  it("returns at most 100 files, with a note", async () => {
    const code = "for i in range(105):\n    open(f'output/f{i:03}.txt', 'w').write(str(i))";
    const result = await runner.run({ code });
    expect(result.files).toHaveLength(100);
    expect(result.files[0]?.filename).toBe("f000.txt");
    expect(result.output).toBe("Script produced no output.\nOnly the first 100 output files were returned.");
  });
});

describe("output files over 25 MB in total", () => {
  let runner: TestPythonRunner;
  beforeAll(async () => {
    runner = await startPythonRunner();
  });
  afterAll(() => runner.close());

  it("are left out, with a note naming each", async () => {
    const code = [
      "open('output/a.bin', 'wb').write(b'a' * (20 * 1024 * 1024))",
      "open('output/b.bin', 'wb').write(b'b' * (10 * 1024 * 1024))",
      "open('output/c.txt', 'w').write('small')",
      "print('done')",
    ].join("\n");
    const result = await runner.run({ code });
    expect(result.files.map((file) => file.filename)).toEqual(["a.bin", "c.txt"]);
    expect(result.output).toBe(
      'done\n\nOutput file "b.bin" was left out: output files may total at most 25 MB.',
    );
  });

  it("cannot write a single file over 25 MB", async () => {
    const code = "open('output/big.bin', 'wb').write(b'x' * (26 * 1024 * 1024))";
    const result = await runner.run({ code });
    expect(result.output).toMatch(/File too large[\s\S]*Exit code: 1\.$/);
    expect(result.files.every((file) => Buffer.from(file.data, "base64").length <= 25 * 1024 * 1024)).toBe(
      true,
    );
  });
});
