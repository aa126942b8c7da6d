/**
 * The ustar archives of backups: written from directories as a stream (so a large database never
 * has to fit in memory), and read back (names to check one, entries to restore a full backup).
 * PGlite's `loadDataDir` reads both what it writes itself and what this writes.
 */
import { createReadStream } from "node:fs";
import { lstat, readdir, readlink } from "node:fs/promises";
import { join } from "node:path";

const BLOCK = 512;

/**
 * How entries keep their permissions: "private" makes every directory 700 and every file 600 and
 * leaves out symbolic links (the database's files); "kept" keeps each one's permission bits (a
 * plugin's executable scripts) and its symbolic links (a plugin's virtual environment).
 */
export type TarModes = "private" | "kept";

export interface TarTreeOptions {
  /** Put before every name (`pglite`): the tree's entries go under that directory. */
  prefix?: string;
  /** Names (relative to the tree's root) left out, with everything under them. */
  skip?: (name: string) => boolean;
  modes?: TarModes;
}

/**
 * The archive of everything under `root`, in name order: each directory (mode 700) before what it
 * holds, each regular file (mode 600) with its contents; symlinks and other kinds are skipped.
 * Names are relative to `root`. The files must not change while it is read.
 */
export async function* tarDirectory(root: string): AsyncGenerator<Uint8Array> {
  yield* tarTree(root);
  yield tarEnd();
}

/**
 * The entries (without the archive's end) of everything under `root`: each directory before what
 * it holds, each regular file with its contents, each symbolic link with "kept" modes; other kinds
 * are skipped. A file whose size changes while it is read fails the archive, naming it.
 */
export async function* tarTree(root: string, options: TarTreeOptions = {}): AsyncGenerator<Uint8Array> {
  const modes = options.modes ?? "private";
  const named = (name: string) => (options.prefix ? `${options.prefix}/${name}` : name);
  for await (const entry of walk(root, "", options.skip ?? (() => false))) {
    const mode = modes === "kept" ? entry.mode : entry.kind === "file" ? 0o600 : 0o700;
    if (entry.kind === "dir") {
      yield header(`${named(entry.name)}/`, { mode, size: 0, mtime: entry.mtime, type: "5" });
      continue;
    }
    if (entry.kind === "link") {
      if (modes !== "kept") continue;
      const target = await readlink(join(root, entry.name));
      yield header(named(entry.name), { mode: 0o777, size: 0, mtime: entry.mtime, type: "2", link: target });
      continue;
    }
    yield header(named(entry.name), { mode, size: entry.size, mtime: entry.mtime, type: "0" });
    let written = 0;
    for await (const chunk of createReadStream(join(root, entry.name))) {
      const bytes = chunk as Buffer;
      const room = entry.size - written;
      if (room <= 0) break;
      const part = bytes.length > room ? bytes.subarray(0, room) : bytes;
      written += part.length;
      yield part;
    }
    if (written !== entry.size) throw new Error(`${entry.name} changed while it was archived`);
    yield padding(entry.size);
  }
}

/** One regular file of `data`, mode 600. */
export function tarFile(name: string, data: Uint8Array, mtime = Math.floor(Date.now() / 1000)): Uint8Array {
  return Buffer.concat([
    header(name, { mode: 0o600, size: data.length, mtime, type: "0" }),
    data,
    padding(data.length),
  ]);
}

/** A directory's own entry (its contents follow as separate entries). */
export function tarDir(name: string, mode = 0o700, mtime = Math.floor(Date.now() / 1000)): Uint8Array {
  return header(`${name.replace(/\/+$/, "")}/`, { mode, size: 0, mtime, type: "5" });
}

/** The end of an archive: two zero blocks. */
export function tarEnd(): Uint8Array {
  return new Uint8Array(BLOCK * 2);
}

function padding(size: number): Uint8Array {
  return new Uint8Array((BLOCK - (size % BLOCK)) % BLOCK);
}

interface Entry {
  kind: "dir" | "file" | "link";
  name: string;
  size: number;
  mtime: number;
  mode: number;
}

async function* walk(root: string, prefix: string, skip: (name: string) => boolean): AsyncGenerator<Entry> {
  const names = (await readdir(join(root, prefix))).sort();
  for (const name of names) {
    const relative = prefix ? `${prefix}/${name}` : name;
    if (skip(relative)) continue;
    const info = await lstat(join(root, relative));
    const mtime = Math.floor(info.mtimeMs / 1000);
    const mode = info.mode & 0o777;
    if (info.isDirectory()) {
      yield { kind: "dir", name: relative, size: 0, mtime, mode };
      yield* walk(root, relative, skip);
    } else if (info.isFile()) {
      yield { kind: "file", name: relative, size: info.size, mtime, mode };
    } else if (info.isSymbolicLink()) {
      yield { kind: "link", name: relative, size: 0, mtime, mode };
    }
  }
}

function header(
  path: string,
  fields: { mode: number; size: number; mtime: number; type: "0" | "2" | "5"; link?: string },
): Uint8Array {
  const block = new Uint8Array(BLOCK);
  const { name, prefix } = splitName(path);
  const put = (offset: number, length: number, text: string) =>
    block.set(new TextEncoder().encode(text).subarray(0, length), offset);
  const octal = (value: number, length: number) => value.toString(8).padStart(length - 1, "0") + "\0";
  put(0, 100, name);
  put(100, 8, octal(fields.mode, 8));
  put(108, 8, octal(0, 8));
  put(116, 8, octal(0, 8));
  put(124, 12, octal(fields.size, 12));
  put(136, 12, octal(fields.mtime, 12));
  put(148, 8, "        ");
  put(156, 1, fields.type);
  if (fields.link !== undefined) {
    if (Buffer.byteLength(fields.link) > 100)
      throw new Error(`${path} links to a path too long for a tar entry`);
    put(157, 100, fields.link);
  }
  put(257, 6, "ustar\0");
  put(263, 2, "00");
  put(345, 155, prefix);
  const sum = block.reduce((total, byte) => total + byte, 0);
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return block;
}

/** ustar keeps a long name as a prefix (up to 155 bytes) and a name (up to 100), split at a `/`. */
function splitName(path: string): { name: string; prefix: string } {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: "" };
  for (let cut = path.indexOf("/"); cut !== -1; cut = path.indexOf("/", cut + 1)) {
    const prefix = path.slice(0, cut);
    const name = path.slice(cut + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100 && name !== "") {
      return { name, prefix };
    }
  }
  throw new Error(`${path} is too long for a tar entry`);
}

/**
 * The entry names of a ustar archive, or undefined when it is not one or is cut short: each entry
 * is a 512-byte header (name, octal size, checksum) followed by its data in 512-byte blocks, and
 * the archive ends with a zero block.
 */
export function tarEntryNames(tar: Uint8Array): string[] | undefined {
  const names: string[] = [];
  for (let offset = 0; offset + BLOCK <= tar.length;) {
    const block = tar.subarray(offset, offset + BLOCK);
    if (block.every((byte) => byte === 0)) return names;
    const size = parseInt(textField(block, 124, 12), 8);
    if (!Number.isSafeInteger(size) || !checksumMatches(block)) return undefined;
    const prefix = textField(block, 345, 155);
    const name = textField(block, 0, 100);
    names.push(prefix ? `${prefix}/${name}` : name);
    offset += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
  }
  return undefined;
}

function textField(block: Uint8Array, start: number, length: number): string {
  const bytes = block.subarray(start, start + length);
  const end = bytes.indexOf(0);
  return new TextDecoder().decode(end === -1 ? bytes : bytes.subarray(0, end)).trim();
}

/** The header's checksum: the sum of its bytes, counting the checksum field itself as spaces. */
function checksumMatches(block: Uint8Array): boolean {
  let sum = 0;
  block.forEach((byte, index) => (sum += index >= 148 && index < 156 ? 0x20 : byte));
  return sum === parseInt(textField(block, 148, 8), 8);
}

/** One entry of an archive read back. */
export interface TarEntry {
  name: string;
  kind: "file" | "dir" | "link";
  /** Permission bits. */
  mode: number;
  /** A file's contents (a view into the archive). */
  data: Uint8Array;
  /** A link's target. */
  link: string;
}

/**
 * The entries of a ustar archive (regular files, directories, symbolic links; other kinds left
 * out), or undefined when it is not one or is cut short.
 */
export function readTar(tar: Uint8Array): TarEntry[] | undefined {
  const entries: TarEntry[] = [];
  for (let offset = 0; offset + BLOCK <= tar.length;) {
    const block = tar.subarray(offset, offset + BLOCK);
    if (block.every((byte) => byte === 0)) return entries;
    const size = parseInt(textField(block, 124, 12), 8);
    if (!Number.isSafeInteger(size) || !checksumMatches(block)) return undefined;
    const start = offset + BLOCK;
    if (start + size > tar.length) return undefined;
    const prefix = textField(block, 345, 155);
    const name = textField(block, 0, 100);
    const type = String.fromCharCode(block[156] ?? 0);
    const kind =
      type === "5" ? "dir" : type === "2" ? "link" : type === "0" || type === "\0" ? "file" : undefined;
    if (kind) {
      entries.push({
        name: (prefix ? `${prefix}/${name}` : name).replace(/\/$/, ""),
        kind,
        mode: parseInt(textField(block, 100, 8), 8) & 0o777,
        data: tar.subarray(start, start + size),
        link: textField(block, 157, 100),
      });
    }
    offset = start + Math.ceil(size / BLOCK) * BLOCK;
  }
  return undefined;
}

/** An archive of `entries` (files and directories), each named as `rename` says. */
export function writeTar(entries: TarEntry[], rename: (name: string) => string = (name) => name): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const entry of entries) {
    const name = rename(entry.name);
    if (entry.kind === "dir")
      parts.push(header(`${name}/`, { mode: entry.mode, size: 0, mtime: 0, type: "5" }));
    else if (entry.kind === "file") {
      parts.push(header(name, { mode: entry.mode, size: entry.data.length, mtime: 0, type: "0" }));
      parts.push(entry.data, padding(entry.data.length));
    }
  }
  parts.push(tarEnd());
  return Buffer.concat(parts);
}
