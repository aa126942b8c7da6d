import { lstat, mkdtemp, realpath, rm } from "node:fs/promises";
import { basename, join } from "node:path";
import { DomainError, errorMessage, isInside } from "@stavrobot/common";
import type { Formats } from "./formats/index.js";
import { NO_FORMAT } from "./formats/index.js";
import { gitClone } from "./git.js";
import type { Plugin } from "./formats/format.js";
import { repositoryName } from "./sources.js";

export interface Fetched {
  /** The clone (removed by `discard`). */
  temp: string;
  /** The plugin's directory: the clone, or the folder the URL's `#path=` named. */
  root: string;
  plugin: Plugin;
}

/**
 * Clones a repository (as the runner, into a fresh directory: cloning runs nothing of the
 * repository's own) and reads the plugin at its root or in the folder `path` names, whatever its
 * format. The plugin's name is its format's own when valid, else derived (see each format), with
 * the folder's or the repository's name to fall back on.
 */
export async function fetchPlugin(
  source: { url: string; path?: string },
  options: { pluginsDir: string; formats: Formats; gitTimeoutMs: number; gitEnv: Record<string, string> },
): Promise<Fetched> {
  const temp = await mkdtemp(join(options.pluginsDir, ".tmp-install-"));
  try {
    try {
      await gitClone(source.url, temp, { timeoutMs: options.gitTimeoutMs, env: options.gitEnv });
    } catch (error) {
      throw error instanceof DomainError
        ? error
        : new DomainError("invalid", `Failed to clone repository: ${errorMessage(error)}`);
    }
    const root = source.path ? await folderOf(temp, source.path) : temp;
    const fallbackName = source.path ? basename(source.path) : repositoryName(source.url);
    let plugin: Plugin;
    try {
      plugin = (await options.formats.load({ dir: root, fallbackName })).plugin;
    } catch (error) {
      const where = source.path ? ` in folder "${source.path}"` : "";
      throw new DomainError("invalid", `Invalid plugin${where}: ${errorMessage(error)}`);
    }
    return { temp, root, plugin };
  } catch (error) {
    await rm(temp, { recursive: true, force: true });
    throw error;
  }
}

/** The folder inside the clone, refused when missing or when a symlink leads it out of the clone. */
async function folderOf(clone: string, path: string): Promise<string> {
  const dir = join(clone, path);
  const info = await lstat(dir).catch(() => undefined);
  const real = info ? await realpath(dir).catch(() => undefined) : undefined;
  if (!info?.isDirectory() || !real || !isInside(await realpath(clone), real)) {
    throw new DomainError(
      "invalid",
      `Invalid plugin: the repository has no folder "${path}" (${NO_FORMAT}).`,
    );
  }
  return dir;
}
