import { describe, expect, it } from "vitest";
import { halfInstalledNpx, inHome } from "./launch.js";

describe("halfInstalledNpx", () => {
  const stderr = (from: string) =>
    "node:internal/modules/esm/resolve:873\n  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);\n" +
    `Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod' imported from ${from}\n` +
    "    at packageResolve (node:internal/modules/esm/resolve:873:9) {\n  code: 'ERR_MODULE_NOT_FOUND'\n}\n\nNode.js v20.19.2";

  it("names npx's copy that a package ran from while its dependencies are missing", () => {
    expect(
      halfInstalledNpx(
        stderr(
          "/plugin-data/memory/.npm/_npx/c98ccc168155bafa/node_modules/@modelcontextprotocol/server-memory/dist/index.js",
        ),
      ),
    ).toBe("c98ccc168155bafa");
  });

  it("names npx's copy whose package.json a stopped fetch never wrote", () => {
    // What npm 10 and 11 print when a start was stopped during the first fetch (seen under load).
    const enoent =
      "npm error code ENOENT\nnpm error syscall open\n" +
      "npm error path /plugin-data/memory-npx/.npm/_npx/c98ccc168155bafa/package.json\nnpm error errno -2\n" +
      "npm error enoent Could not read package.json: Error: ENOENT: no such file or directory, open " +
      "'/plugin-data/memory-npx/.npm/_npx/c98ccc168155bafa/package.json'\n" +
      "npm error enoent This is related to npm not being able to find a file.\n";
    expect(halfInstalledNpx(enoent)).toBe("c98ccc168155bafa");
    // The owner's own project without a package.json is theirs to mend.
    expect(
      halfInstalledNpx(
        "npm error enoent Could not read package.json: Error: ENOENT: no such file or directory, open '/srv/tools/package.json'",
      ),
    ).toBe(undefined);
  });

  it("leaves a package that is missing anywhere else alone (the owner's own install)", () => {
    expect(
      halfInstalledNpx(stderr("/srv/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js")),
    ).toBe(undefined);
  });

  it("leaves npx's copy alone when the failure is another one", () => {
    expect(
      halfInstalledNpx(
        "Error: EACCES: permission denied, open '/plugin-data/m/.npm/_npx/c98ccc168155bafa/node_modules/x/data.json'",
      ),
    ).toBe(undefined);
  });
});

describe("inHome", () => {
  it("puts ~ and ~/… in the server's own folder and leaves other values", () => {
    expect(inHome("~", "/plugin-data/m")).toBe("/plugin-data/m");
    expect(inHome("~/memory.jsonl", "/plugin-data/m")).toBe("/plugin-data/m/memory.jsonl");
    expect(inHome("/srv/~x", "/plugin-data/m")).toBe("/srv/~x");
  });
});
