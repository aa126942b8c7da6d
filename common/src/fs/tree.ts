import { existsSync } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { chmod, lchown, lstat, mkdir, readdir, rm, rmdir, unlink } from "node:fs/promises";
import type { Owner } from "./atomic.js";
import { PROC_FD, entryOf, openDirNoFollow } from "./no-follow.js";

/**
 * Directories that untrusted users write into, handled without following their symlinks: the
 * walks go through directory descriptors, so a process of that user swapping a directory for a
 * symlink midway cannot send them outside the tree.
 */

const HAVE_PROC_FD = existsSync(PROC_FD);

/**
 * Makes `path` a real directory with exactly `mode`, given to `owner` (when given): a symlink or
 * file found there is removed first, and the mode and owner are set through a descriptor, so a
 * directory the service prepares is never someone else's.
 */
export async function ensureRealDir(path: string, mode: number, owner?: Owner): Promise<void> {
  const info = await lstat(path).catch(() => undefined);
  if (info && !info.isDirectory()) await unlink(path);
  if (!info?.isDirectory()) await mkdir(path, { recursive: true, mode });
  const dir = await openDirNoFollow(path);
  try {
    const now = await dir.stat();
    if ((now.mode & 0o7777) !== mode) await dir.chmod(mode);
    if (owner && (now.uid !== owner.uid || now.gid !== owner.gid)) await dir.chown(owner.uid, owner.gid);
  } finally {
    await dir.close();
  }
}

/**
 * Makes `path` a new, empty directory with `mode`, given to `owner`, whatever was at its path
 * before (in the shared /tmp anyone may have planted a symlink or a directory there): it is
 * removed, a symlink itself and never its target, until mkdir wins.
 */
export async function freshDir(path: string, mode: number, owner?: Owner): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await removeTree(path);
    try {
      await mkdir(path, { mode });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt >= 5) throw error;
    }
  }
  await chmod(path, mode);
  if (owner) await lchown(path, owner.uid, owner.gid);
}

/**
 * Gives a whole tree to `owner` without following symlinks (lchown). A regular file with several
 * hard links owned by someone else is skipped: it may be a link to a file elsewhere, and chowning
 * it would hand that file to the owner.
 */
export async function chownTree(root: string, owner: Owner): Promise<void> {
  const info = await lstat(root);
  if (info.uid !== owner.uid || info.gid !== owner.gid) await lchown(root, owner.uid, owner.gid);
  if (!info.isDirectory()) return;
  if (!HAVE_PROC_FD) throw new Error(`chownTree needs ${PROC_FD}`);
  const dir = await openDirNoFollow(root);
  try {
    await chownEntries(dir, owner);
  } finally {
    await dir.close();
  }
}

async function chownEntries(dir: FileHandle, owner: Owner): Promise<void> {
  for (const name of await readdir(entryOf(dir))) {
    const path = entryOf(dir, name);
    const info = await lstat(path).catch(() => undefined);
    if (!info) continue;
    if (info.isFile() && info.nlink > 1 && info.uid !== owner.uid) continue;
    if (info.uid !== owner.uid || info.gid !== owner.gid) await lchown(path, owner.uid, owner.gid);
    if (!info.isDirectory()) continue;
    const child = await openDirNoFollow(path).catch(() => undefined); // Swapped for a symlink: skip.
    if (!child) continue;
    try {
      await chownEntries(child, owner);
    } finally {
      await child.close();
    }
  }
}

/**
 * `rm -rf` for trees an untrusted user controls: a still-running process of theirs cannot turn the
 * removal into one of files outside the tree. `path` itself must sit in a directory they cannot
 * write to (or one with the sticky bit).
 */
export async function removeTree(path: string): Promise<void> {
  const info = await lstat(path).catch(() => undefined);
  if (!info) return;
  if (!info.isDirectory()) {
    await unlink(path);
    return;
  }
  if (!HAVE_PROC_FD) {
    await rm(path, { recursive: true, force: true });
    return;
  }
  for (let attempt = 0; ; attempt++) {
    const dir = await openDirNoFollow(path);
    try {
      await removeEntries(dir);
    } finally {
      await dir.close();
    }
    try {
      await rmdir(path);
      return;
    } catch (error) {
      // Something is still writing into it: sweep again a few times.
      if ((error as NodeJS.ErrnoException).code !== "ENOTEMPTY" || attempt >= 5) throw error;
    }
  }
}

async function removeEntries(dir: FileHandle): Promise<void> {
  for (const name of await readdir(entryOf(dir))) {
    const path = entryOf(dir, name);
    const info = await lstat(path).catch(() => undefined);
    if (!info) continue;
    if (!info.isDirectory()) {
      await unlink(path).catch(() => undefined);
      continue;
    }
    const child = await openDirNoFollow(path).catch(() => undefined);
    if (!child) {
      await unlink(path).catch(() => undefined); // It became a symlink: remove the link itself.
      continue;
    }
    try {
      await removeEntries(child);
    } finally {
      await child.close();
    }
    await rmdir(path).catch(() => undefined);
  }
}
