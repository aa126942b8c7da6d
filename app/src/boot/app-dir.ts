import { basename, dirname } from "node:path";
import { fileURLToPath } from "node:url";

/** Where the running code was loaded from, inside `app/`: the sources, tsc's output or the bundle. */
export type CodeDir = "src" | "dist" | "bundle";
const CODE_DIRS: ReadonlySet<string> = new Set<CodeDir>(["src", "dist", "bundle"]);

export interface AppLayout {
  /** `app/`: `web/` lives beside the code directory. */
  appDir: string;
  /** The directory holding `app/` (the repository, or the image's working directory). */
  rootDir: string;
  codeDir: CodeDir;
}

/**
 * The layout around a module of the app. A module's own depth under `src` does not say where
 * `app/` is once the code is bundled into one file, so this walks up to the code directory.
 */
export function appLayoutOf(moduleFile: string): AppLayout {
  let dir = dirname(moduleFile);
  while (!CODE_DIRS.has(basename(dir))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`${moduleFile} is not inside app/src, app/dist or app/bundle`);
    dir = up;
  }
  const appDir = dirname(dir);
  return { appDir, rootDir: dirname(appDir), codeDir: basename(dir) as CodeDir };
}

export const APP_LAYOUT = appLayoutOf(fileURLToPath(import.meta.url));
