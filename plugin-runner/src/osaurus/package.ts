import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join, posix } from "node:path";
import { DomainError, errorMessage } from "@stavrobot/common";
import { OSAURUS_MARKER } from "../formats/osaurus.js";
import type { OsaurusPackage } from "../formats/osaurus.js";
import type { PluginSkill } from "../formats/format.js";
import { readSkill } from "../skills.js";

/** Larger packages are refused: no plugin needs more. */
export const ZIP_MAX_BYTES = 64 * 1024 * 1024;
const UNPACKED_MAX_BYTES = 256 * 1024 * 1024;
const MAX_ENTRIES = 5_000;

const SEMVER = /^(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;

export interface ZipName {
  pluginId: string;
  version: string;
}

/**
 * The plugin id and version of `<plugin_id>-<version>.zip`, read from the right: the version is
 * what follows the last `-` that leaves a semver version (`my-plugin-2.3.1-beta.zip` is
 * `my-plugin` at `2.3.1-beta`). Refused when the name does not follow the convention.
 */
export function parseZipName(fileName: string): ZipName {
  const stem = /\.zip$/i.test(fileName) ? fileName.slice(0, -4) : undefined;
  for (let at = stem?.lastIndexOf("-") ?? -1; stem && at > 0; at = stem.lastIndexOf("-", at - 1)) {
    const version = stem.slice(at + 1);
    if (SEMVER.test(version)) return { pluginId: stem.slice(0, at), version };
  }
  throw new DomainError(
    "invalid",
    `"${fileName.slice(0, 200)}" is not an Osaurus package name: it must be <plugin_id>-<version>.zip with a semver version (e.g. com.acme.echo-1.0.0.zip).`,
  );
}

export interface Unpacked {
  /** Every file, by its path inside the package (a single wrapper folder removed). */
  files: Map<string, Uint8Array>;
  /** The shared library, an ELF object for this machine. */
  library: string;
  skills: PluginSkill[];
  warnings: string[];
}

/**
 * Reads a package: its files, its library (checked), its skills (validated). Throws with the reason.
 * The zip library is loaded here, when a package is installed (~7 MB of the runner otherwise).
 */
export async function unpackZip(bytes: Uint8Array): Promise<Unpacked> {
  const { unzipSync } = await import("fflate");
  let entries: Record<string, Uint8Array>;
  let declared = 0;
  let count = 0;
  try {
    entries = unzipSync(bytes, {
      filter: (file) => {
        count++;
        declared += file.originalSize;
        if (count > MAX_ENTRIES) throw new Error(`it has more than ${MAX_ENTRIES} entries`);
        if (declared > UNPACKED_MAX_BYTES) throw new Error("it unpacks to more than 256 MB");
        return !file.name.endsWith("/");
      },
    });
  } catch (error) {
    throw new DomainError("invalid", `The package is not a readable zip file: ${errorMessage(error)}`);
  }
  const warnings: string[] = [];
  const kept = new Map<string, Uint8Array>();
  for (const [name, data] of Object.entries(entries)) {
    const path = safePath(name);
    if (path === undefined)
      throw new DomainError("invalid", `The package holds an unsafe path: "${name.slice(0, 200)}".`);
    if (path.startsWith("__MACOSX/") || posix.basename(path) === ".DS_Store") continue;
    kept.set(path, data);
  }
  const files = withoutWrapper(kept);
  for (const reserved of [OSAURUS_MARKER, "config.json"]) {
    if (files.delete(reserved))
      warnings.push(`The package's own ${reserved} was left out: the runner keeps that file.`);
  }
  const library = findLibrary(files);
  const skills: PluginSkill[] = [];
  for (const [path, data] of [...files.entries()].sort(
    ([a], [b]) => depth(a) - depth(b) || a.localeCompare(b),
  )) {
    if (posix.basename(path).toLowerCase() !== "skill.md") continue;
    const read = await readSkill(Buffer.from(data).toString("utf8"));
    if (!read.ok) {
      warnings.push(`Skill ${path} left out: ${read.error}`);
    } else if (skills.some((skill) => skill.name === read.skill.name)) {
      warnings.push(`Skill ${path} left out: another skill is named "${read.skill.name}".`);
    } else {
      skills.push({ ...read.skill, file: path });
    }
  }
  return { files, library, skills, warnings };
}

/** Writes the package's files and the runner's marker into `dir` (which exists and is empty). */
export async function writePackage(dir: string, unpacked: Unpacked, marker: OsaurusPackage): Promise<void> {
  for (const [path, data] of unpacked.files) {
    const target = join(dir, path);
    await mkdir(dirname(target), { recursive: true, mode: 0o755 });
    await writeFile(target, data, { mode: 0o644, flag: "wx" });
  }
  await writeFile(join(dir, OSAURUS_MARKER), JSON.stringify(marker, null, 2) + "\n", { mode: 0o644 });
}

/** A zip entry's path, normalised; undefined when absolute, escaping (`..`) or otherwise unsafe. */
function safePath(name: string): string | undefined {
  if (name.includes("\0") || name.includes("\\") || name.startsWith("/")) return undefined;
  const parts = name.split("/").filter((part) => part !== "" && part !== ".");
  if (parts.length === 0 || parts.some((part) => part === "..")) return undefined;
  return parts.join("/");
}

/** A package whose every file lies in one folder is read from inside it (as the real installer does). */
function withoutWrapper(files: Map<string, Uint8Array>): Map<string, Uint8Array> {
  const tops = new Set([...files.keys()].map((path) => path.split("/")[0]));
  const [top] = [...tops];
  if (tops.size !== 1 || top === undefined || files.has(top)) return files;
  return new Map([...files.entries()].map(([path, data]) => [path.slice(top.length + 1), data]));
}

const MACHINES: Record<string, number> = { x64: 0x3e, arm64: 0xb7 };
const MACHINE_NAMES: Record<number, string> = { 0x3e: "x86-64", 0xb7: "arm64", 0x03: "x86", 0x28: "arm" };

/**
 * The library to load: the first ELF shared object for this machine among the package's `.so`
 * and `.dylib` files. A Mach-O library (Osaurus's published, macOS-only builds) is refused with a
 * message saying so, as is an ELF object for another architecture.
 */
function findLibrary(files: Map<string, Uint8Array>): string {
  const candidates = [...files.keys()]
    .filter((path) => /\.(so(\.\d+)*|dylib)$/i.test(path))
    .sort((a, b) => a.split("/").length - b.split("/").length || a.localeCompare(b));
  const problems: string[] = [];
  const wanted = MACHINES[process.arch];
  for (const path of candidates) {
    const data = files.get(path) as Uint8Array;
    const kind = libraryKind(data);
    if (kind === "macho") {
      problems.push(
        `${path} is a macOS library (Mach-O): published Osaurus builds are macOS-only, and this machine runs Linux. Install a Linux build of the plugin (an ELF .so built from the same source).`,
      );
    } else if (kind === "elf") {
      const machine = Buffer.from(data).readUInt16LE(18);
      const type = Buffer.from(data).readUInt16LE(16);
      if (type !== 3) problems.push(`${path} is an ELF file but not a shared library.`);
      else if (machine !== wanted) {
        problems.push(
          `${path} is a Linux library for ${MACHINE_NAMES[machine] ?? `machine ${machine}`}, but this machine is ${process.arch}.`,
        );
      } else return path;
    } else {
      problems.push(`${path} is not a shared library (neither ELF nor Mach-O).`);
    }
  }
  if (problems.length === 0) {
    throw new DomainError(
      "invalid",
      "The package holds no plugin library (an ELF .so with the Osaurus C ABI).",
    );
  }
  throw new DomainError(
    "invalid",
    `The package holds no library this machine can load: ${problems.join(" ")}`,
  );
}

function libraryKind(data: Uint8Array): "elf" | "macho" | "other" {
  if (data.length < 20) return "other";
  const magic = Buffer.from(data).readUInt32BE(0);
  if (magic === 0x7f454c46) return data[4] === 2 && data[5] === 1 ? "elf" : "other";
  if ([0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe, 0xcafebabe].includes(magic)) return "macho";
  return "other";
}

function depth(path: string): number {
  return path.split("/").length;
}
