import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import type { TransportedFile } from "../contracts/plugin-runner.js";
import type { Owner } from "./atomic.js";
import { UnsafePathError, readFileNoFollow } from "./no-follow.js";

export interface CollectOptions {
  /** More files than this are left out, with a note. */
  maxFiles: number;
  /** The files returned total at most this; each one that does not fit is left out, with a note. */
  maxBytes: number;
  /** Only files of this user with a single link are read (when the run switched user). */
  owner?: Owner;
  /** Names to pass over (e.g. input files the run did not change). */
  skip?: (name: string) => Promise<boolean>;
}

/**
 * The files a sandboxed run left in `dir` for its caller: the top-level regular files, by name,
 * base64, read without following symlinks (directories, symlinks and special files are passed over
 * silently), with a note for each one left out. Nothing when `dir` is not a real directory.
 */
export async function collectOutputFiles(
  dir: string,
  options: CollectOptions,
): Promise<{ files: TransportedFile[]; notes: string[] }> {
  const files: TransportedFile[] = [];
  const notes: string[] = [];
  const info = await lstat(dir).catch(() => undefined);
  if (!info?.isDirectory()) return { files, notes };
  let total = 0;
  for (const name of (await readdir(dir).catch(() => [] as string[])).sort()) {
    if (await options.skip?.(name)) continue;
    if (files.length >= options.maxFiles) {
      notes.push(`Only the first ${options.maxFiles} output files were returned.`);
      break;
    }
    try {
      const data = await readFileNoFollow(join(dir, name), options.maxBytes - total, options.owner);
      total += data.length;
      files.push({ filename: name, data: data.toString("base64") });
    } catch (error) {
      if (error instanceof UnsafePathError && error.reason === "too-large") {
        const limitMb = Math.round(options.maxBytes / 1024 / 1024);
        notes.push(`Output file "${name}" was left out: output files may total at most ${limitMb} MB.`);
      }
    }
  }
  return { files, notes };
}
