import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  UnsafePathError,
  chownTree,
  isInside,
  readFileNoFollow,
  removeTree,
  resolveInside,
  writeFileAtomic,
} from "./fs-safe.js";

const isRoot = process.getuid?.() === 0;
let root: string;
let tree: string;
let outside: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "fs-safe-"));
  tree = join(root, "tree");
  outside = join(root, "outside");
  mkdirSync(join(tree, "sub", "deeper"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(outside, "precious.txt"), "keep me");
  writeFileSync(join(tree, "sub", "deeper", "file.txt"), "inner");
  symlinkSync(outside, join(tree, "sub", "escape-dir"));
  symlinkSync(join(outside, "precious.txt"), join(tree, "escape-file"));
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

describe("removeTree", () => {
  it("removes the tree and its symlinks but nothing they point to", async () => {
    await removeTree(tree);
    expect(existsSync(tree)).toBe(false);
    expect(readFileSync(join(outside, "precious.txt"), "utf8")).toBe("keep me");
  });
});

describe.skipIf(!isRoot)("chownTree (root)", () => {
  it("chowns the tree, never what its symlinks point to, nor foreign hard links", async () => {
    linkSync(join(outside, "precious.txt"), join(tree, "hardlink.txt"));
    const owner = { uid: 65534, gid: 65534 };
    await chownTree(tree, owner);
    expect(statSync(join(tree, "sub", "deeper", "file.txt")).uid).toBe(65534);
    expect(lstatSync(join(tree, "sub", "escape-dir")).uid).toBe(65534);
    expect(statSync(join(outside, "precious.txt")).uid).toBe(0);
    expect(statSync(outside).uid).toBe(0);
  });
});

describe("reads and writes", () => {
  it("refuses symlinks, foreign hard links and big files", async () => {
    await expect(readFileNoFollow(join(tree, "escape-file"), 100)).rejects.toBeInstanceOf(UnsafePathError);
    await expect(readFileNoFollow(join(tree, "sub"), 100)).rejects.toBeInstanceOf(UnsafePathError);
    await expect(readFileNoFollow(join(outside, "precious.txt"), 3)).rejects.toThrow(/larger than/);
    linkSync(join(outside, "precious.txt"), join(tree, "hardlink.txt"));
    const owner = { uid: process.getuid?.() ?? 0, gid: 0 };
    await expect(readFileNoFollow(join(tree, "hardlink.txt"), 100, owner)).rejects.toThrow(/own/);
    expect((await readFileNoFollow(join(tree, "sub", "deeper", "file.txt"), 100, owner)).toString()).toBe(
      "inner",
    );
  });

  it("replaces a symlink on write instead of following it", async () => {
    await writeFileAtomic(join(tree, "escape-file"), "new");
    expect(readFileSync(join(outside, "precious.txt"), "utf8")).toBe("keep me");
    expect(lstatSync(join(tree, "escape-file")).isSymbolicLink()).toBe(false);
    expect(readFileSync(join(tree, "escape-file"), "utf8")).toBe("new");
  });

  it("resolves entrypoints only inside their directory", async () => {
    expect(await resolveInside(join(tree, "sub"), "deeper/file.txt")).toBe(
      join(tree, "sub", "deeper", "file.txt"),
    );
    await expect(resolveInside(tree, "../outside/precious.txt")).rejects.toThrow(/outside/);
    await expect(resolveInside(tree, "escape-file")).rejects.toThrow(/outside/);
    await expect(resolveInside(tree, "/etc/passwd")).rejects.toThrow(/relative/);
    await expect(resolveInside(tree, "sub")).rejects.toThrow(/regular file/);
    expect(isInside("/a/b", "/a/b/c")).toBe(true);
    expect(isInside("/a/b", "/a/bc")).toBe(false);
    expect(isInside("/a/b", "/a/b")).toBe(false);
  });
});
