import { lstat, realpath, stat } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, sep } from "node:path";
import { UnsafePathError } from "./no-follow.js";

/** True when `child` is strictly inside `parent` (both absolute, already resolved). */
export function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel.length > 0 && !rel.startsWith("..") && !isAbsolute(rel) && rel.split(sep)[0] !== "..";
}

/**
 * Resolves a path a manifest names relative to `base` and checks that, with every symlink
 * followed, it is a regular file strictly inside `base`. Returns the real path.
 */
export async function resolveInside(base: string, name: string): Promise<string> {
  if (name.length === 0 || isAbsolute(name) || name.includes("\0")) {
    throw new UnsafePathError(`"${name}" must be a relative path`, "outside");
  }
  const realBase = await realpath(base);
  let target: string;
  try {
    target = await realpath(join(realBase, name));
  } catch {
    throw new UnsafePathError(`"${name}" does not exist`, "not-regular");
  }
  if (!isInside(realBase, target)) {
    throw new UnsafePathError(`"${name}" points outside its directory`, "outside");
  }
  const info = await lstat(target);
  if (!info.isFile()) throw new UnsafePathError(`"${name}" is not a regular file`, "not-regular");
  return target;
}

/**
 * The directory nearest the root on the way to `path` that users other than its owner cannot pass
 * through (no `o+x`), or undefined. Without namespaces a sandboxed user runs on the real paths,
 * so it must be able to get there.
 */
export async function firstClosedAncestor(path: string): Promise<string | undefined> {
  const closed: string[] = [];
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const info = await stat(dir).catch(() => undefined);
    if (info && (info.mode & 0o001) === 0) closed.push(dir);
    if (dir === dirname(dir)) break;
  }
  return closed.pop();
}
