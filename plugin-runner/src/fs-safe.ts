import { constants, existsSync } from "node:fs";
import { lchown, lstat, mkdir, open, readdir, realpath, rename, rm, rmdir, unlink } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { dirname, isAbsolute, join, relative, sep } from "node:path";

/**
 * The runner is root and plugin directories belong to untrusted plugin users, so every read or
 * write it does inside them must refuse to follow symlinks a plugin may have planted.
 */

export interface Owner {
  uid: number;
  gid: number;
}

/** Thrown for a file that is a symlink or not a regular file where one was expected. */
export class UnsafePathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnsafePathError";
  }
}

/**
 * Reads a regular file without following a symlink at its last component; refuses big files. With
 * `owner`, also refuses a file that is not the owner's or that has other hard links (it could be a
 * link to a file the owner may not read).
 */
export async function readFileNoFollow(path: string, maxBytes: number, owner?: Owner): Promise<Buffer> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ELOOP") throw new UnsafePathError(`${path} is a symlink`);
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new UnsafePathError(`${path} is not a regular file`);
    if (owner && (info.uid !== owner.uid || info.nlink > 1)) {
      throw new UnsafePathError(`${path} is not a plain file of the plugin's own`);
    }
    if (info.size > maxBytes) throw new UnsafePathError(`${path} is larger than ${maxBytes} bytes`);
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/**
 * Replaces `path` atomically: writes a fresh temp file beside it (O_EXCL, so never through a
 * symlink), hands it to `owner`, then renames it over the target. A symlink at `path` is replaced
 * itself, never followed.
 */
export async function writeFileAtomic(
  path: string,
  data: string,
  owner?: Owner,
  mode = 0o600,
): Promise<void> {
  const temp = join(dirname(path), `.tmp-${randomUUID()}`);
  const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode);
    if (owner) await handle.chown(owner.uid, owner.gid);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

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
    throw new UnsafePathError(`"${name}" must be a relative path`);
  }
  const realBase = await realpath(base);
  let target: string;
  try {
    target = await realpath(join(realBase, name));
  } catch {
    throw new UnsafePathError(`"${name}" does not exist`);
  }
  if (!isInside(realBase, target)) throw new UnsafePathError(`"${name}" points outside its directory`);
  const info = await lstat(target);
  if (!info.isFile()) throw new UnsafePathError(`"${name}" is not a regular file`);
  return target;
}

/** Makes sure `path` is a real directory (a symlink or file there is removed first). */
export async function ensureRealDir(path: string, mode: number, owner?: Owner): Promise<void> {
  const info = await lstat(path).catch(() => undefined);
  if (info && !info.isDirectory()) await unlink(path);
  if (!info || !info.isDirectory()) await mkdir(path, { mode });
  if (owner) {
    const now = info?.isDirectory() ? info : await lstat(path);
    if (now.uid !== owner.uid || now.gid !== owner.gid) await lchown(path, owner.uid, owner.gid);
  }
}

/** Linux: a path inside an open directory that the kernel resolves through the descriptor. */
const PROC_FD = "/proc/self/fd";
const HAVE_PROC_FD = existsSync(PROC_FD);

type DirHandle = Awaited<ReturnType<typeof open>>;

function openDirNoFollow(path: string): Promise<DirHandle> {
  return open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
}

/** `name` inside the directory `dir` is open on. A plugin renaming or swapping the directory's path
 * in the meantime cannot redirect this: the lookup starts from the descriptor, not from the path. */
function entryOf(dir: DirHandle, name = ""): string {
  return name ? `${PROC_FD}/${dir.fd}/${name}` : `${PROC_FD}/${dir.fd}`;
}

/**
 * Gives a whole tree to `owner` without following symlinks (lchown), walking through directory
 * descriptors so that a plugin process swapping a directory for a symlink mid-walk cannot send the
 * walk outside the tree. A regular file with several hard links owned by someone else is skipped: it
 * may be a link to a file elsewhere, and chowning it would hand that file to the plugin.
 */
export async function chownTree(root: string, owner: Owner): Promise<void> {
  const info = await lstat(root);
  if (info.uid !== owner.uid || info.gid !== owner.gid) await lchown(root, owner.uid, owner.gid);
  if (!info.isDirectory()) return;
  if (!HAVE_PROC_FD) throw new Error("chownTree needs /proc/self/fd");
  const dir = await openDirNoFollow(root);
  try {
    await chownEntries(dir, owner);
  } finally {
    await dir.close();
  }
}

async function chownEntries(dir: DirHandle, owner: Owner): Promise<void> {
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
 * `rm -rf` for trees a plugin controls, walking through directory descriptors like chownTree, so a
 * still-running plugin process cannot turn the removal into one of files outside the tree. `path`
 * itself must sit in a directory the plugin cannot write to.
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

async function removeEntries(dir: DirHandle): Promise<void> {
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

export async function pathExists(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined)) !== undefined;
}
