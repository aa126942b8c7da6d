/**
 * The ustar archives of embedded-database backups: written from a directory as a stream (so a
 * large database never has to fit in memory), and their entry names read back to check one.
 * PGlite's `loadDataDir` reads both what it writes itself and what this writes.
 */
import { createReadStream } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";

const BLOCK = 512;

/**
 * The archive of everything under `root`, in name order: each directory (mode 700) before what it
 * holds, each regular file (mode 600) with its contents; symlinks and other kinds are skipped.
 * Names are relative to `root`. The files must not change while it is read.
 */
export async function* tarDirectory(root: string): AsyncGenerator<Uint8Array> {
  for await (const entry of walk(root, "")) {
    if (entry.kind === "dir") {
      yield header(`${entry.name}/`, { mode: 0o700, size: 0, mtime: entry.mtime, type: "5" });
      continue;
    }
    yield header(entry.name, { mode: 0o600, size: entry.size, mtime: entry.mtime, type: "0" });
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
    const padding = (BLOCK - (entry.size % BLOCK)) % BLOCK;
    if (padding > 0) yield new Uint8Array(padding);
  }
  yield new Uint8Array(BLOCK * 2);
}

interface Entry {
  kind: "dir" | "file";
  name: string;
  size: number;
  mtime: number;
}

async function* walk(root: string, prefix: string): AsyncGenerator<Entry> {
  const names = (await readdir(join(root, prefix))).sort();
  for (const name of names) {
    const relative = prefix ? `${prefix}/${name}` : name;
    const info = await lstat(join(root, relative));
    const mtime = Math.floor(info.mtimeMs / 1000);
    if (info.isDirectory()) {
      yield { kind: "dir", name: relative, size: 0, mtime };
      yield* walk(root, relative);
    } else if (info.isFile()) {
      yield { kind: "file", name: relative, size: info.size, mtime };
    }
  }
}

function header(
  path: string,
  fields: { mode: number; size: number; mtime: number; type: "0" | "5" },
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
