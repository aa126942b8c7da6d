import { createHash } from "node:crypto";
import { lstat, mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, posix } from "node:path";
import { DomainError } from "@stavrobot/common";

/** A skill's files by their path inside its folder (`SKILL.md`, `scripts/x.py`, …). */
export type SkillFiles = Map<string, Buffer>;

/** What one skill may bring: its files are read whole, by the model among others. */
export const SKILL_LIMITS = { files: 200, fileBytes: 1024 * 1024, totalBytes: 5 * 1024 * 1024 } as const;

/**
 * The content's hash: every file's path and SHA-256, in path order. What the owner approves; any
 * change to any file is another hash.
 */
export function hashFiles(files: SkillFiles): string {
  const lines = [...files.keys()].sort().map(
    (path) =>
      `${path}\0${createHash("sha256")
        .update(files.get(path) as Buffer)
        .digest("hex")}\n`,
  );
  return createHash("sha256").update(lines.join("")).digest("hex");
}

/**
 * A path inside a skill as it may be stored: relative, `/`-separated, no `..`, no hidden parts
 * (`.git`), no control characters. Undefined when it is not one.
 */
export function cleanSkillPath(path: string): string | undefined {
  const normal = posix.normalize(path.replace(/\\/g, "/")).replace(/^\.\//, "");
  if (!normal || normal.startsWith("/") || normal.startsWith("../") || normal === "..") return undefined;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f]/.test(normal)) return undefined;
  if (normal.split("/").some((part) => part.startsWith(".") || part === "")) return undefined;
  return normal;
}

/** Checks the limits as files are added; the error says which one was passed. */
export function checkLimits(files: SkillFiles): void {
  if (files.size > SKILL_LIMITS.files)
    throw new DomainError("too-large", `The skill has more than ${SKILL_LIMITS.files} files.`);
  let total = 0;
  for (const [path, data] of files) {
    if (data.length > SKILL_LIMITS.fileBytes)
      throw new DomainError("too-large", `The skill's file ${path} is larger than 1 MB.`);
    total += data.length;
  }
  if (total > SKILL_LIMITS.totalBytes)
    throw new DomainError("too-large", "The skill's files are larger than 5 MB together.");
}

/** Writes a skill's folder whole (beside it first, then moved in), replacing what was there. */
export async function writeSkillDir(dir: string, files: SkillFiles): Promise<void> {
  const staging = `${dir}.installing`;
  await rm(staging, { recursive: true, force: true });
  for (const [path, data] of files) {
    const target = join(staging, path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, data);
  }
  const old = `${dir}.old`;
  await rm(old, { recursive: true, force: true });
  await rename(dir, old).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "ENOENT") throw error;
  });
  await rename(staging, dir);
  await rm(old, { recursive: true, force: true });
}

/**
 * A folder's files as they are on disk: regular files only (a link is not followed), hidden
 * ones (`.git`) left out, and at most `limits` read, so a large repository is refused before it
 * fills the memory.
 */
export async function readSkillDir(
  dir: string,
  limits: { files: number; bytes: number } = { files: SKILL_LIMITS.files, bytes: SKILL_LIMITS.totalBytes },
): Promise<SkillFiles> {
  const files: SkillFiles = new Map();
  let bytes = 0;
  const walk = async (relative: string): Promise<void> => {
    for (const entry of await readdir(join(dir, relative), { withFileTypes: true })) {
      if (entry.name.startsWith(".")) continue;
      const path = relative ? `${relative}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) {
        bytes += (await lstat(join(dir, path))).size;
        if (files.size >= limits.files || bytes > limits.bytes)
          throw new DomainError(
            "too-large",
            "There are more files than a skill may have (200 files, 5 MB): name the skill's folder with #path=<folder>.",
          );
        files.set(path, await readFile(join(dir, path)));
      }
    }
  };
  await walk("");
  return files;
}

export async function isDirectory(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined))?.isDirectory() ?? false;
}
