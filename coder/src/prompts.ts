import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** `coder/`, from `src/` and from `dist/` alike: the prompt and the guide ship beside them. */
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

/** Paths of the agent's instructions on this machine, and as the agent sees them. */
export interface StagedPrompts {
  systemPrompt: string;
  guide: string;
  visible: { systemPrompt: string; guide: string };
  remove(): Promise<void>;
}

/**
 * Copies `system-prompt.txt` (with the guide's path filled in) and `PLUGIN.md` into a fresh
 * world-readable directory under the system temp directory. The agent runs as a plugin user, who
 * may not be able to reach the coder's own files (a checkout under /root, say); with namespaces the
 * copies are mounted at `/coder/…`, without them they are read where they are.
 */
export async function stagePrompts(namespaces: boolean, sourceDir = PACKAGE_DIR): Promise<StagedPrompts> {
  const dir = await mkdtemp(join(tmpdir(), "stavrobot-coder-"));
  await chmod(dir, 0o755);
  const staged = { systemPrompt: join(dir, "system-prompt.txt"), guide: join(dir, "PLUGIN.md") };
  const visible = namespaces
    ? { systemPrompt: "/coder/system-prompt.txt", guide: "/coder/PLUGIN.md" }
    : staged;
  const prompt = await readFile(join(sourceDir, "system-prompt.txt"), "utf8");
  await publish(staged.systemPrompt, prompt.replaceAll("{{PLUGIN_GUIDE}}", visible.guide));
  await publish(staged.guide, await readFile(join(sourceDir, "PLUGIN.md"), "utf8"));
  return { ...staged, visible, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** The process umask may be 077: modes are set explicitly. */
async function publish(path: string, text: string): Promise<void> {
  await writeFile(path, text, { mode: 0o644 });
  await chmod(path, 0o644);
}
