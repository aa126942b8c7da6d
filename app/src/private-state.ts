import { chmod, lstat, mkdir, opendir } from "node:fs/promises";
import { join } from "node:path";

/**
 * The owner's private state: the embedded database, the config directory, stored files. On a
 * machine where the app runs as root next to plugin users (`npm start` as root), nothing of it may
 * be readable, writable or listable by anyone else.
 */
export interface PrivatePaths {
  /** Directories to create (if missing) and keep at mode 700. */
  dirs: string[];
  /** Trees whose every directory (700) and file (600) is made private: existing installs included. */
  trees: string[];
  /** Single files kept at mode 600 when they exist. */
  files: string[];
}

/**
 * No group or other permission on anything this process creates from now on. Set before the
 * embedded database opens: PGlite creates its files with mode 666 and relies on the umask.
 */
export function restrictUmask(): void {
  process.umask(0o077);
}

/** Makes the private state owner-only; cheap when it already is (one lstat per entry). */
export async function securePrivateState(paths: PrivatePaths): Promise<void> {
  for (const dir of paths.dirs) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await restrict(dir, 0o700);
  }
  for (const tree of paths.trees) await restrictTree(tree);
  for (const file of paths.files) await restrict(file, 0o600);
}

async function restrict(path: string, mode: number): Promise<void> {
  const info = await lstat(path).catch(() => undefined);
  if (!info || info.isSymbolicLink()) return;
  if ((info.mode & 0o777 & ~mode) !== 0) await chmod(path, info.mode & mode);
}

async function restrictTree(root: string): Promise<void> {
  const info = await lstat(root).catch(() => undefined);
  if (!info?.isDirectory()) return;
  await restrict(root, 0o700);
  const dir = await opendir(root);
  for await (const entry of dir) {
    const path = join(root, entry.name);
    if (entry.isDirectory()) await restrictTree(path);
    else if (entry.isFile()) await restrict(path, 0o600);
  }
}
