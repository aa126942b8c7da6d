import {
  chmodSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
} from "node:fs";
import { symlinkSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  UnsafePathError,
  chownTree,
  collectOutputFiles,
  ensureRealDir,
  firstClosedAncestor,
  freshDir,
  isInside,
  pathExists,
  readFileNoFollow,
  removeTree,
  resolveInside,
  writeFileAtomic,
} from "./index.js";

const isRoot = process.getuid?.() === 0;
let root: string;
let tree: string;
let outside: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "common-fs-"));
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

describe("firstClosedAncestor", () => {
  it("names the directory other users cannot pass through, unless the user owns it", async () => {
    const closed = join(root, "closed");
    mkdirSync(join(closed, "cache"), { recursive: true });
    chmodSync(root, 0o711);
    chmodSync(closed, 0o700);
    const target = join(closed, "cache", "uv");
    expect(await firstClosedAncestor(target)).toBe(closed);
    // Its owner passes (the run user owning its cache directory is not "locked out").
    const me = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
    const owner = { uid: me.uid === 0 ? 65534 : me.uid, gid: me.uid === 0 ? 65534 : me.gid };
    if (me.uid === 0) execFileSync("chown", ["65534:65534", closed]);
    expect(await firstClosedAncestor(target, owner)).toBeUndefined();
    // Another user does not; neither does its owner without u+x.
    expect(await firstClosedAncestor(target, { uid: owner.uid + 1, gid: owner.gid + 1 })).toBe(closed);
    chmodSync(closed, 0o600);
    expect(await firstClosedAncestor(target, owner)).toBe(closed);
    chmodSync(closed, 0o700);
  });
});

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

describe("directories prepared for someone else", () => {
  it("ensureRealDir replaces a symlink with a real directory of the given mode, leaving the target alone", async () => {
    const path = join(tree, "cache");
    symlinkSync(outside, path);
    await ensureRealDir(path, 0o700);
    expect(lstatSync(path).isDirectory()).toBe(true);
    expect(lstatSync(path).mode & 0o777).toBe(0o700);
    expect(readFileSync(join(outside, "precious.txt"), "utf8")).toBe("keep me");
    chmodSync(path, 0o755);
    await ensureRealDir(path, 0o700);
    expect(lstatSync(path).mode & 0o777).toBe(0o700);
  });

  it("freshDir empties whatever was at the path, a symlink included, and never its target", async () => {
    const path = join(tree, "work");
    symlinkSync(outside, path);
    await freshDir(path, 0o700);
    expect(lstatSync(path).isDirectory()).toBe(true);
    expect(readdirSync(path)).toEqual([]);
    expect(await pathExists(join(outside, "precious.txt"))).toBe(true);
    writeFileSync(join(path, "left-over"), "x");
    await freshDir(path, 0o700);
    expect(readdirSync(path)).toEqual([]);
    expect(await pathExists(join(path, "left-over"))).toBe(false);
  });
});

describe("collectOutputFiles", () => {
  it("returns the top-level regular files by name, passing over symlinks, directories and skipped names", async () => {
    const out = join(root, "out");
    mkdirSync(join(out, "nested"), { recursive: true });
    writeFileSync(join(out, "b.txt"), "bee");
    writeFileSync(join(out, "a.txt"), "ay");
    writeFileSync(join(out, "input.txt"), "unchanged");
    symlinkSync(join(outside, "precious.txt"), join(out, "link.txt"));
    const collected = await collectOutputFiles(out, {
      maxFiles: 10,
      maxBytes: 1024,
      skip: async (name) => name === "input.txt",
    });
    expect(collected).toEqual({
      files: [
        { filename: "a.txt", data: Buffer.from("ay").toString("base64") },
        { filename: "b.txt", data: Buffer.from("bee").toString("base64") },
      ],
      notes: [],
    });
  });

  it("leaves out files past the count or the total size, with a note each", async () => {
    const out = join(root, "out");
    mkdirSync(out);
    writeFileSync(join(out, "1.bin"), Buffer.alloc(600 * 1024));
    writeFileSync(join(out, "2.bin"), Buffer.alloc(600 * 1024));
    writeFileSync(join(out, "3.bin"), "x");
    writeFileSync(join(out, "4.bin"), "y");
    const collected = await collectOutputFiles(out, { maxFiles: 2, maxBytes: 1024 * 1024 });
    expect(collected.files.map((file) => file.filename)).toEqual(["1.bin", "3.bin"]);
    expect(collected.notes).toEqual([
      'Output file "2.bin" was left out: output files may total at most 1 MB.',
      "Only the first 2 output files were returned.",
    ]);
    expect(await collectOutputFiles(join(tree, "sub", "escape-dir"), { maxFiles: 2, maxBytes: 100 })).toEqual(
      {
        files: [],
        notes: [],
      },
    );
  });
});
