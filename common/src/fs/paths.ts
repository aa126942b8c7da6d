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
 * The directory nearest the root on the way to `path` that `user` cannot pass through, or
 * undefined. A directory is passable by its owner with `u+x`, by its group with `g+x`, and by
 * anyone with `o+x`; without a user, only `o+x` counts (any other user). Without namespaces a
 * sandboxed user runs on the real paths, so it must be able to get there.
 */
export async function firstClosedAncestor(
  path: string,
  user?: { uid: number; gid: number },
): Promise<string | undefined> {
  const closed: string[] = [];
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const info = await stat(dir).catch(() => undefined);
    if (info && !passable(info, user)) closed.push(dir);
    if (dir === dirname(dir)) break;
  }
  return closed.pop();
}

function passable(
  info: { mode: number; uid: number; gid: number },
  user?: { uid: number; gid: number },
): boolean {
  if (user?.uid === 0) return true;
  if (user && info.uid === user.uid) return (info.mode & 0o100) !== 0;
  if (user && info.gid === user.gid) return (info.mode & 0o010) !== 0;
  return (info.mode & 0o001) !== 0;
}

/**
 * A PATH with only the directories `user` can reach and search (without namespaces a run uses
 * this machine's own paths: a runtime under a mode-700 home, such as a pyenv shim in /root, would
 * be found first and fail with "Permission denied", where a system one further on works). The
 * directories left out are returned too, for the service to say so.
 */
export async function pathReachableBy(
  path: string,
  user?: { uid: number; gid: number },
): Promise<{ path: string; dropped: string[] }> {
  const kept: string[] = [];
  const dropped: string[] = [];
  for (const dir of path.split(":")) {
    if (!dir) continue;
    // The directory itself must be searchable too: look from a name inside it.
    if (isAbsolute(dir) && (await firstClosedAncestor(join(dir, "-"), user))) dropped.push(dir);
    else kept.push(dir);
  }
  return { path: kept.join(":"), dropped };
}
