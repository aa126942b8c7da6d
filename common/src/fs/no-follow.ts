import { constants } from "node:fs";
import { lstat, open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import type { Owner } from "./atomic.js";

/**
 * The services run as root inside directories that belong to untrusted users (plugins, scripts,
 * the coding agent), so what they read there must never follow a symlink one of them planted.
 */

/** Why a path was refused. */
export type UnsafeReason = "symlink" | "not-regular" | "not-own" | "too-large" | "outside";

/** Thrown for a path that is a symlink, not a regular file, someone else's, too large or outside. */
export class UnsafePathError extends Error {
  constructor(
    message: string,
    readonly reason: UnsafeReason,
  ) {
    super(message);
    this.name = "UnsafePathError";
  }
}

/** Linux: a path inside an open directory that the kernel resolves through the descriptor. */
export const PROC_FD = "/proc/self/fd";

/**
 * `name` inside the directory `dir` is open on (or the directory itself). Someone renaming or
 * swapping the directory's path meanwhile cannot redirect this: the lookup starts from the
 * descriptor, not from the path.
 */
export function entryOf(dir: FileHandle, name = ""): string {
  return name ? `${PROC_FD}/${dir.fd}/${name}` : `${PROC_FD}/${dir.fd}`;
}

/** Opens a directory, refusing a symlink at its last component (ELOOP) and a non-directory (ENOTDIR). */
export function openDirNoFollow(path: string): Promise<FileHandle> {
  return open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
}

/**
 * Reads a regular file without following a symlink at its last component; refuses one over
 * `maxBytes` (also when it grew between the check and the read). With `owner`, also refuses a file
 * that is not the owner's or that has other hard links (it could be a link to a file the owner may
 * not read). Errors other than these (ENOENT, ENXIO for a socket) are thrown as they are.
 */
export async function readFileNoFollow(path: string, maxBytes: number, owner?: Owner): Promise<Buffer> {
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ELOOP") {
      throw new UnsafePathError(`${path} is a symlink`, "symlink");
    }
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new UnsafePathError(`${path} is not a regular file`, "not-regular");
    if (owner && (info.uid !== owner.uid || info.nlink > 1)) {
      throw new UnsafePathError(`${path} is not a plain file of the user's own`, "not-own");
    }
    const tooLarge = () => new UnsafePathError(`${path} is larger than ${maxBytes} bytes`, "too-large");
    if (info.size > maxBytes) throw tooLarge();
    const data = await handle.readFile();
    if (data.length > maxBytes) throw tooLarge();
    return data;
  } finally {
    await handle.close();
  }
}

/** Whether anything (a symlink included, never followed) is at `path`. */
export async function pathExists(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined)) !== undefined;
}
