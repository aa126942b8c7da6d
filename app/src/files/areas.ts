import { lstat, mkdir, readdir, realpath, rm } from "node:fs/promises";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { MAIN_AGENT_ID } from "../db/messages.js";

/** Below the owner's files root: one directory per subagent, holding that agent's own areas. */
const AGENTS_DIR = "agents";

/**
 * The file areas an agent works with. The owner's (the main agent's) are `$DATA_DIR/files`
 * (owner-only): `uploads/` (files people sent), `workspace/` (manage_files, text to speech),
 * `plugin_output/<plugin>/` and `python/` (files tools returned). A subagent's are the same four
 * under `agents/<id>/`: what its contact sends lands there, its tools read and write only there,
 * and any path of the owner's (or of another agent's) is refused. The owner's agent reaches every
 * subagent's files by their absolute paths (they lie under its root). Any file in an agent's areas
 * may be handed to a plugin or a Python run and attached to a message; nothing outside may.
 */
export class FileAreas {
  readonly uploads: string;
  readonly workspace: string;
  readonly python: string;
  /** The subagent's own areas, made the first time each is asked for (owner's areas only). */
  private readonly subagents = new Map<number, FileAreas>();
  /** A subagent's directories, made with its first path (the owner's are made at start). */
  private made: Promise<void> | undefined;

  /** `agentId`: whose areas these are (the main agent's: the owner's, at the files root). */
  constructor(
    readonly root: string,
    readonly agentId = MAIN_AGENT_ID,
  ) {
    this.uploads = join(root, "uploads");
    this.workspace = join(root, "workspace");
    this.python = join(root, "python");
  }

  /** Whether these are a subagent's areas (a contact's agent), not the owner's. */
  get isSubagent(): boolean {
    return this.agentId !== MAIN_AGENT_ID;
  }

  /** The areas of `agentId`: these for the main agent, a subagent's own under `agents/<id>/`. */
  of(agentId: number | undefined): FileAreas {
    if (agentId === undefined || agentId === this.agentId) return this;
    if (this.isSubagent) throw new Error(`agent ${this.agentId}'s file areas hold no other agent's`);
    let areas = this.subagents.get(agentId);
    if (!areas) {
      if (!Number.isSafeInteger(agentId) || agentId < 1) throw new Error(`no agent ${agentId}`);
      areas = new FileAreas(join(this.root, AGENTS_DIR, String(agentId)), agentId);
      this.subagents.set(agentId, areas);
    }
    return areas;
  }

  pluginOutput(plugin: string): string {
    // "plugin_output" cannot be a plugin name (plugin names have no underscores).
    return join(this.root, "plugin_output", plugin);
  }

  async ensure(): Promise<void> {
    for (const dir of [this.root, this.uploads, this.workspace])
      await mkdir(dir, { recursive: true, mode: 0o700 });
  }

  /**
   * Whether a resolved path is a file someone sent: in these uploads, or (the owner's agent) in a
   * subagent's uploads.
   */
  isUpload(resolved: string): boolean {
    if (resolved.startsWith(this.uploads + sep)) return true;
    if (this.isSubagent) return false;
    const parts = relative(this.root, resolved).split(sep);
    return (
      parts.length > 3 && parts[0] === AGENTS_DIR && /^\d+$/.test(parts[1] ?? "") && parts[2] === "uploads"
    );
  }

  /**
   * Where a file's words came from, when from outside the owner (trust/gate.ts): a file a contact
   * sent (a subagent's uploads) or anything in a contact's agent's areas, and a plugin's output.
   */
  outsideOrigin(resolved: string): string | undefined {
    const parts = relative(this.root, resolved).split(sep);
    if (this.isSubagent) return parts[0] === "uploads" ? "a file a contact sent" : undefined;
    if (parts[0] === AGENTS_DIR && /^\d+$/.test(parts[1] ?? "")) return `a file in agent ${parts[1]}'s area`;
    if (parts[0] === "plugin_output" && parts[1]) return `plugin:${parts[1]} (a file it returned)`;
    return undefined;
  }

  /**
   * Resolves a path the model gave: relative paths are inside `base` (the workspace by default),
   * absolute ones must lie under these areas' root (a subagent's: its own directory, never the
   * owner's). `..` segments, paths leaving the root and symlinks anywhere on the way are refused.
   * The file itself need not exist (for writes).
   */
  async resolve(path: string, base = this.workspace): Promise<string> {
    if (this.isSubagent)
      await (this.made ??= this.ensure().catch((error: unknown) => {
        this.made = undefined;
        throw error;
      }));
    const trimmed = path.trim();
    if (!trimmed || trimmed.includes("\0")) throw new FileAreaError("A file path is needed.");
    if (trimmed.split(/[\\/]/).includes(".."))
      throw new FileAreaError(`"${path}": ".." is not allowed in paths.`);
    const target = isAbsolute(trimmed) ? resolve(trimmed) : resolve(base, trimmed);
    const rel = relative(this.root, target);
    if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) {
      throw new FileAreaError(
        this.isSubagent
          ? `"${path}" is not in your file areas (${this.root}): you can use only your own files (your uploads, workspace, Python and plugin outputs there).`
          : `"${path}" is outside the file areas (${this.root}).`,
      );
    }
    // No component may be a symlink: a link could lead anywhere.
    let current = this.root;
    for (const part of rel.split(sep)) {
      current = join(current, part);
      const info = await lstat(current).catch(() => undefined);
      if (!info) break;
      if (info.isSymbolicLink())
        throw new FileAreaError(`"${path}" goes through a symbolic link, which is not allowed.`);
    }
    const realRoot = await realpath(this.root);
    if (realRoot !== this.root) return join(realRoot, rel);
    return target;
  }

  /**
   * Deletes regular files older than `maxAgeMs` under uploads, workspace, plugin outputs and Python
   * outputs, the subagents' included, except those in `keep` (files a message still waiting in the
   * inbox refers to). Returns how many were removed.
   */
  async removeOlderThan(maxAgeMs: number, keep: ReadonlySet<string>, now = Date.now()): Promise<number> {
    let removed = 0;
    const sweep = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) {
          await sweep(path);
          continue;
        }
        if (!entry.isFile() || keep.has(path)) continue;
        const info = await lstat(path).catch(() => undefined);
        if (info && now - info.mtimeMs > maxAgeMs) {
          await rm(path, { force: true });
          removed++;
        }
      }
    };
    const dirs = [this.uploads, this.workspace, this.python, join(this.root, "plugin_output")];
    if (!this.isSubagent) dirs.push(join(this.root, AGENTS_DIR));
    for (const dir of dirs) await sweep(dir);
    return removed;
  }
}

/** A path the model gave that does not name an allowed file. */
export class FileAreaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FileAreaError";
  }
}
