import { lstat, mkdir, readdir, realpath, rm } from "node:fs/promises";
import { isAbsolute, join, relative, resolve, sep } from "node:path";

/**
 * The file areas the assistant works with, all under `$DATA_DIR/files` (owner-only):
 * `uploads/` (files people sent), `workspace/` (manage_files, text to speech), `plugin_output/<plugin>/`
 * and `python/` (files tools returned). Any file here may be handed to a plugin or a Python run and
 * attached to a message; nothing outside may.
 */
export class FileAreas {
  readonly uploads: string;
  readonly workspace: string;
  readonly python: string;

  constructor(readonly root: string) {
    this.uploads = join(root, "uploads");
    this.workspace = join(root, "workspace");
    this.python = join(root, "python");
  }

  pluginOutput(plugin: string): string {
    // "plugin_output" cannot be a plugin name (plugin names have no underscores).
    return join(this.root, "plugin_output", plugin);
  }

  async ensure(): Promise<void> {
    for (const dir of [this.root, this.uploads, this.workspace])
      await mkdir(dir, { recursive: true, mode: 0o700 });
  }

  /**
   * Resolves a path the model gave: relative paths are inside `base` (the workspace by default),
   * absolute ones must lie under the files root. `..` segments, paths leaving the root and symlinks
   * anywhere on the way are refused. The file itself need not exist (for writes).
   */
  async resolve(path: string, base = this.workspace): Promise<string> {
    const trimmed = path.trim();
    if (!trimmed || trimmed.includes("\0")) throw new FileAreaError("A file path is needed.");
    if (trimmed.split(/[\\/]/).includes(".."))
      throw new FileAreaError(`"${path}": ".." is not allowed in paths.`);
    const target = isAbsolute(trimmed) ? resolve(trimmed) : resolve(base, trimmed);
    const rel = relative(this.root, target);
    if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) {
      throw new FileAreaError(`"${path}" is outside the file areas (${this.root}).`);
    }
    // No component may be a symlink: a link could lead anywhere.
    let current = this.root;
    for (const part of rel.split(sep)) {
      current = join(current, part);
      const info = await lstat(current).catch(() => undefined);
      if (!info) break;
      if (info.isSymbolicLink())
        throw new FileAreaError(`"${path}" goes through a symbolic link, which is not allowed.`);
    }
    const realRoot = await realpath(this.root);
    if (realRoot !== this.root) return join(realRoot, rel);
    return target;
  }

  /**
   * Deletes regular files older than `maxAgeMs` under uploads, workspace, plugin outputs and Python
   * outputs, except those in `keep` (files a message still waiting in the inbox refers to).
   * Returns how many were removed.
   */
  async removeOlderThan(maxAgeMs: number, keep: ReadonlySet<string>, now = Date.now()): Promise<number> {
    let removed = 0;
    const sweep = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) {
          await sweep(path);
          continue;
        }
        if (!entry.isFile() || keep.has(path)) continue;
        const info = await lstat(path).catch(() => undefined);
        if (info && now - info.mtimeMs > maxAgeMs) {
          await rm(path, { force: true });
          removed++;
        }
      }
    };
    for (const dir of [this.uploads, this.workspace, this.python, join(this.root, "plugin_output")])
      await sweep(dir);
    return removed;
  }
}

/** A path the model gave that does not name an allowed file. */
export class FileAreaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FileAreaError";
  }
}
