import { accessSync, constants, existsSync, lstatSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { delimiter, dirname, isAbsolute, join, relative, sep } from "node:path";

/**
 * What a sandbox shows of this machine: the system directories, read-only, and the runtimes the
 * tool PATH names. Both namespace launchers (bubblewrap and util-linux unshare) build their new
 * root from the same description.
 */

export interface Mount {
  /** Path on this machine. */
  source: string;
  /** Path inside the sandbox. */
  target: string;
  writable?: boolean;
}

/** One entry of the system part of a sandbox's root. */
export type SystemEntry =
  | { kind: "bind"; source: string; target: string; optional?: boolean }
  | { kind: "symlink"; value: string; path: string };

/** The PATH of an untrusted process when nothing else is given: the system directories. */
export const SYSTEM_TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The system directories every sandbox gets read-only (symlinks such as /bin → usr/bin kept). */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];

/** The read-only system directories as they exist here (a symlinked /bin stays a symlink). */
export function systemEntries(): SystemEntry[] {
  const entries: SystemEntry[] = [];
  for (const dir of SYSTEM_DIRS) {
    const info = lstatOrUndefined(dir);
    if (!info) continue;
    if (info.isSymbolicLink()) entries.push({ kind: "symlink", value: readlinkSync(dir), path: dir });
    else if (info.isDirectory()) entries.push({ kind: "bind", source: dir, target: dir });
  }
  // DNS: /etc/resolv.conf often points into /run (systemd-resolved), which is not mounted.
  const resolv = realpathOrUndefined("/etc/resolv.conf");
  if (resolv && !resolv.startsWith("/etc/")) {
    entries.push({ kind: "bind", source: dirname(resolv), target: dirname(resolv), optional: true });
  }
  return entries;
}

/**
 * The directories a tool's PATH names, as read-only mounts, so runtimes installed outside the
 * system directories (uv in ~/.local/bin, pyenv, nvm) are found inside a sandbox. A directory in a
 * home directory brings its whole tool root (`~/.pyenv`, `~/.nvm`), since shims call into it,
 * except `~/.local/bin`, which is mounted alone (`~/.local/share` holds other programs' data).
 */
export function runtimeMounts(toolPath: string, home?: string): Mount[] {
  const mounts = new Map<string, Mount>();
  const add = (dir: string): void => {
    if (!isAbsolute(dir) || !existsSync(dir) || isSystemPath(dir)) return;
    if ([...mounts.keys()].some((known) => dir === known || dir.startsWith(known + sep))) return;
    for (const known of [...mounts.keys()]) if (known.startsWith(dir + sep)) mounts.delete(known);
    mounts.set(dir, { source: dir, target: dir });
  };
  for (const entry of toolPath.split(delimiter)) {
    if (!entry) continue;
    const dir = toolRoot(entry, home);
    add(dir);
    const real = realpathOrUndefined(entry);
    if (real && real !== entry) add(toolRoot(real, home));
  }
  return [...mounts.values()];
}

function toolRoot(dir: string, home: string | undefined): string {
  if (!home || !isAbsolute(home)) return dir;
  const rel = relative(home, dir);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) return dir;
  const parts = rel.split(sep);
  if (parts[0] === ".local") return dir;
  return join(home, parts[0] as string);
}

/** `/a/b/c` → `/a`, `/a/b`. */
export function ancestors(path: string): string[] {
  const parts = path.split("/").filter(Boolean);
  return parts.slice(0, -1).map((_, index) => "/" + parts.slice(0, index + 1).join("/"));
}

export function isSystemPath(dir: string): boolean {
  return SYSTEM_DIRS.some((system) => dir === system || dir.startsWith(system + sep));
}

/** The absolute path of a program found on `path`, or undefined. */
export function which(program: string, path: string): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, program);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function realpathOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}
