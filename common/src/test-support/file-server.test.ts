import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveDirectory, type FileServer } from "./file-server.js";

let root: string;
let server: FileServer;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "file-server-"));
  mkdirSync(join(root, "site", "sub"), { recursive: true });
  writeFileSync(join(root, "site", "plugin-1.0.0.zip"), "zip bytes");
  writeFileSync(join(root, "site", ".hidden"), "hidden");
  writeFileSync(join(root, "site", "sub", "inner.txt"), "inner");
  writeFileSync(join(root, "outside.txt"), "outside");
  server = await serveDirectory(join(root, "site"));
});

afterAll(async () => {
  await server.close();
  rmSync(root, { recursive: true, force: true });
});

describe("serveDirectory", () => {
  it("answers a file of its folder", async () => {
    const response = await fetch(`${server.url}/plugin-1.0.0.zip`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/zip");
    expect(await response.text()).toBe("zip bytes");
  });

  it("answers nothing outside it, in a subfolder, hidden or missing", async () => {
    for (const path of [
      "/%2E%2E%2Foutside.txt",
      "/..%2Foutside.txt",
      "/sub/inner.txt",
      "/.hidden",
      "/missing.zip",
      "/",
    ]) {
      const response = await fetch(`${server.url}${path}`);
      expect(response.status, path).toBe(404);
      await response.arrayBuffer();
    }
  });
});
