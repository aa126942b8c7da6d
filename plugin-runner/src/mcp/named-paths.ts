import { lstat, realpath, stat } from "node:fs/promises";
import type { Stats } from "node:fs";
import { dirname, isAbsolute, join, normalize, sep } from "node:path";
import { isSystemPath } from "@stavrobot/common";
import type { McpServerDeclaration, Mount } from "@stavrobot/common";

/**
 * What a stdio server is shown of this machine besides its own directories: the paths its
 * declaration names (`command`, `args`, `env` values, `cwd`, `readOnlyPaths`; `--root=/srv/notes`
 * counts as `/srv/notes`), since real servers are given their code and their files that way.
 * - **code**, read-only: a path inside a `node_modules` tree brings that whole install (Node finds
 *   a package's dependencies in the `node_modules` folders above it, so the package's own folder is
 *   not enough); a script (executable, or `.js`, `.py`, `.sh` …) brings its project (the nearest
 *   folder above it with a `package.json`, `node_modules`, `pyproject.toml` or `pyvenv.cfg`, else
 *   its own folder); a symlink brings its folder and its target's.
 * - **data**, writable unless `readOnly` (or listed in `readOnlyPaths`): any other existing file or
 *   folder.
 * - **folder**: a named file that does not exist yet (`MEMORY_FILE_PATH`) gets its folder,
 *   writable, created when it is missing; never `/`, a top-level folder or a home folder.
 * Nothing else of the machine is shown; system directories are there already, read-only.
 */
export type NamedPath =
  | { kind: "code"; path: string }
  | { kind: "data"; path: string; writable: boolean; directory: boolean }
  | { kind: "folder"; path: string; writable: true; exists: boolean };

/** A named path that is not shown, and why (logged when the server starts). */
export interface Passed {
  path: string;
  reason: string;
}

/** Folders the sandbox makes itself: a host path there would be hidden by them. */
const SANDBOX_ROOTS = ["/proc", "/dev", "/sys", "/plugins", "/cache", "/plugin-data"];
const SCRIPT = /\.(c|m)?(j|t)s$|\.(py|sh|rb|pl)$/;
const PROJECT_MARKERS = ["package.json", "node_modules", "pyproject.toml", "pyvenv.cfg"];

/** Every absolute path the declaration names, as written (`~/…` names its own HOME: not here). */
export function pathsNamed(declaration: McpServerDeclaration): string[] {
  const tokens = [
    declaration.command ?? "",
    ...declaration.args,
    ...Object.values(declaration.env),
    declaration.cwd ?? "",
    ...declaration.readOnlyPaths,
  ];
  const paths = new Set<string>();
  for (const token of tokens) {
    for (const candidate of [token, token.slice(token.indexOf("=") + 1)]) {
      if (isAbsolute(candidate) && !candidate.includes("\0")) paths.add(tidy(candidate));
    }
  }
  return [...paths].sort();
}

/** The declaration's named paths, each as code, data or a new file's folder; those not shown, and why. */
export async function namedPaths(
  declaration: McpServerDeclaration,
  home = process.env.HOME,
): Promise<{ paths: NamedPath[]; passed: Passed[] }> {
  const readOnly = declaration.readOnlyPaths.filter((path) => isAbsolute(path)).map(tidy);
  const found = new Map<string, NamedPath>();
  const passed: Passed[] = [];
  const add = (named: NamedPath): void => {
    const known = found.get(named.path);
    // Code stays read-only whatever else names it; otherwise writable wins.
    if (!known || named.kind === "code" || (known.kind !== "code" && named.writable && !known.writable))
      found.set(named.path, named);
  };
  for (const path of pathsNamed(declaration)) {
    if (hidden(path)) continue;
    const writable = !declaration.readOnly && !readOnly.some((ro) => within(path, ro));
    const info = await lstat(path).catch(() => undefined);
    if (!info) {
      const folder = dirname(path);
      if (!writable) passed.push({ path, reason: "it does not exist (and the server may not write)" });
      else if (hidden(folder) || depth(folder) < 2 || isHome(folder, home))
        passed.push({
          path,
          reason: `it does not exist, and its folder ${folder} is too wide to give: name a file in a folder of its own`,
        });
      else add({ kind: "folder", path: folder, writable: true, exists: await isDirectory(folder) });
      continue;
    }
    const code = await codeOf(path, info, home);
    if (code.length > 0) for (const root of code) add({ kind: "code", path: root });
    else add({ kind: "data", path, writable, directory: info.isDirectory() });
  }
  return { paths: [...found.values()].sort((a, b) => (a.path < b.path ? -1 : 1)), passed };
}

/**
 * The mounts for the named paths, parents before what is inside them (a read-only code tree
 * inside a writable folder stays read-only).
 */
export function namedMounts(paths: readonly NamedPath[]): Mount[] {
  return paths.map((named) => ({
    source: named.path,
    target: named.path,
    writable: named.kind !== "code" && named.writable,
  }));
}

/**
 * The roots the server is told of (`roots/list`): the data paths and new files' folders its
 * declaration names, the places the owner gave it to work in (code it runs is not one).
 */
export function grantedRoots(paths: readonly NamedPath[]): string[] {
  return paths.filter((named) => named.kind !== "code").map((named) => named.path);
}

/** The code roots a path brings (none: it is data). */
async function codeOf(path: string, info: Stats, home: string | undefined): Promise<string[]> {
  const real = await realpath(path).catch(() => path);
  const roots = new Set<string>();
  for (const candidate of new Set([path, real])) {
    const install = nodeModulesRoot(candidate);
    if (install) {
      roots.add(join(install, "node_modules"));
      if (await exists(join(install, "package.json"))) roots.add(join(install, "package.json"));
    }
  }
  if (roots.size > 0) {
    if (info.isSymbolicLink() && !nodeModulesRoot(path)) roots.add(dirname(path));
    return [...roots];
  }
  const target = await stat(real).catch(() => undefined);
  if (!target?.isFile() || !((target.mode & 0o111) !== 0 || SCRIPT.test(real))) return [];
  roots.add(await projectRoot(dirname(real), home));
  if (info.isSymbolicLink()) roots.add(dirname(path));
  return [...roots];
}

/** `/srv/mcp` for `/srv/mcp/node_modules/@scope/pkg/node_modules/dep/index.js` (the outermost install). */
function nodeModulesRoot(path: string): string | undefined {
  const at = path.indexOf(`${sep}node_modules${sep}`);
  const whole = path.endsWith(`${sep}node_modules`) ? path.length - "/node_modules".length : -1;
  const index = at === -1 ? whole : whole === -1 ? at : Math.min(at, whole);
  if (index < 0) return undefined;
  return index === 0 ? "/" : path.slice(0, index);
}

/** The nearest folder at or above `dir` that holds a project's files; `dir` when there is none. */
async function projectRoot(dir: string, home: string | undefined): Promise<string> {
  for (let current = dir; depth(current) >= 1; current = dirname(current)) {
    if (isHome(current, home) || hidden(current)) break;
    for (const marker of PROJECT_MARKERS) if (await exists(join(current, marker))) return current;
  }
  return dir;
}

function hidden(path: string): boolean {
  return (
    path === "/" ||
    path === "/tmp" ||
    isSystemPath(path) ||
    SANDBOX_ROOTS.some((root) => path === root || path.startsWith(root + "/"))
  );
}

function isHome(path: string, home: string | undefined): boolean {
  return path === "/root" || /^\/home\/[^/]+$/.test(path) || (home !== undefined && path === tidy(home));
}

function within(path: string, folder: string): boolean {
  return path === folder || path.startsWith(folder === "/" ? "/" : folder + "/");
}

function depth(path: string): number {
  return path.split("/").filter(Boolean).length;
}

function tidy(path: string): string {
  return normalize(path).replace(/\/+$/, "") || "/";
}

async function exists(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined)) !== undefined;
}

async function isDirectory(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isDirectory() ?? false;
}
