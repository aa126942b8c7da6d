import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "@stavrobot/common";
import { APP_LAYOUT } from "./app-dir.js";

/** Files shipped at the repo root (or copied beside the build in the container image). */
export function findFile(name: string): string {
  const root = APP_LAYOUT.rootDir;
  const candidates = [join(process.cwd(), name), join(root, name), join(root, "..", name)];
  const found = candidates.find((path) => {
    try {
      readFileSync(path);
      return true;
    } catch {
      return false;
    }
  });
  if (!found) throw new ConfigError(`Cannot find ${name} (looked in ${candidates.join(", ")})`);
  return found;
}
