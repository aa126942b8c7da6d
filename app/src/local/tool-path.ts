import { delimiter, dirname } from "node:path";
import { SYSTEM_TOOL_PATH, which } from "@stavrobot/common";

export { SYSTEM_TOOL_PATH };

/** The runtimes published plugins rely on. */
const RUNTIMES = ["uv", "python3", "node", "git"];

/**
 * The PATH plugin tools get under `npm start`: the directories where this launcher itself finds
 * uv, python3, node and git (a `uv` installed in the owner's ~/.local/bin, a pyenv Python), then
 * the system directories. `PLUGIN_TOOL_PATH` overrides it.
 */
export function toolPathFor(launcherPath: string, env: NodeJS.ProcessEnv = {}): string {
  if (env.PLUGIN_TOOL_PATH) return env.PLUGIN_TOOL_PATH;
  const dirs: string[] = [];
  for (const program of RUNTIMES) {
    const found = which(program, launcherPath);
    if (found && !dirs.includes(dirname(found))) dirs.push(dirname(found));
  }
  for (const dir of SYSTEM_TOOL_PATH.split(delimiter)) if (!dirs.includes(dir)) dirs.push(dir);
  return dirs.join(delimiter);
}
