import { randomUUID } from "node:crypto";
import { lchown, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { SerialLock, collectOutputFiles, freshDir, removeTree } from "@stavrobot/common";
import type { Logger, Owner, TransportedFile } from "@stavrobot/common";

/** Where a run's directory is seen from inside the sandbox (namespaces mode). */
export const VISIBLE_RUN_DIR = "/tmp/run";

export interface RunDir {
  /** The directory on this machine. */
  host: string;
  /** The same directory as the script sees it (its cwd). */
  visible: string;
}

export interface RunDirsOptions {
  /** Namespaces mode: parent of every run's private directory (root's, mode 700). */
  runsDir: string;
  /** Plain mode: the one directory runs take turns in, at its real path (default /tmp/run). */
  plainRunDir: string;
  namespaces: boolean;
  /** The run user, when runs switch to it. */
  owner?: Owner;
  logger: Logger;
}

/**
 * Gives every run a fresh directory holding `input/` (the given files), `output/` (what the script
 * writes there is returned), `tmp/` (its TMPDIR) and `script.py`, and removes it afterwards, so
 * nothing of one run is visible to the next.
 * - namespaces mode: a private directory per run under `runsDir`, mounted at /tmp/run: runs
 *   proceed concurrently and see only their own; removal happens after the answer.
 * - plain mode: no mounts exist, so the runs take turns in the real `plainRunDir` (the paths the
 *   model is told about stay true), each after the previous one's files are gone (the caller
 *   ends a run's leftover processes before it reads the output).
 */
export class RunDirs {
  private readonly cleanups = new Set<Promise<void>>();
  private readonly turns = new SerialLock();

  constructor(private readonly options: RunDirsOptions) {}

  async with<T>(work: (dir: RunDir) => Promise<T>): Promise<T> {
    if (this.options.namespaces) {
      const host = join(this.options.runsDir, randomUUID());
      await this.create(host);
      try {
        return await work({ host, visible: VISIBLE_RUN_DIR });
      } finally {
        this.removeLater(host);
      }
    }
    return this.turns.run(async () => {
      const host = this.options.plainRunDir;
      await this.createFresh(host);
      try {
        return await work({ host, visible: host });
      } finally {
        await removeTree(host).catch((error: unknown) =>
          this.options.logger.warn("could not remove the run directory", { error: String(error) }),
        );
      }
    });
  }

  /** Resolves once every run directory scheduled for removal is gone. */
  async settle(): Promise<void> {
    while (this.cleanups.size > 0) await Promise.all([...this.cleanups]);
  }

  /** Writes the script and the input files (by their names, already checked to be plain). */
  async fill(
    dir: RunDir,
    script: string,
    files: readonly { filename: string; data: Buffer }[],
  ): Promise<void> {
    await this.writeOwned(join(dir.host, "script.py"), script);
    for (const file of files) await this.writeOwned(join(dir.host, "input", file.filename), file.data);
  }

  /**
   * The top-level regular files of `output/`, read without following symlinks (directories,
   * symlinks and special files are ignored), at most `maxFiles` totalling `maxBytes`; a note for
   * each one left out. Only files of the run user with one link are read: a hard link could name
   * a file the run user may not read itself.
   */
  collect(
    dir: RunDir,
    maxFiles: number,
    maxBytes: number,
  ): Promise<{ files: TransportedFile[]; notes: string[] }> {
    const owner = this.options.owner;
    return collectOutputFiles(join(dir.host, "output"), { maxFiles, maxBytes, ...(owner ? { owner } : {}) });
  }

  /**
   * Plain mode: the directory sits in the shared /tmp, where anyone may have put something at its
   * path; whatever is there is removed (a symlink itself, never its target) until mkdir wins.
   */
  private async createFresh(host: string): Promise<void> {
    await freshDir(host, 0o700, this.options.owner);
    for (const sub of ["input", "output", "tmp"]) await this.mkdirOwned(join(host, sub));
  }

  private async create(host: string): Promise<void> {
    await this.mkdirOwned(host);
    for (const sub of ["input", "output", "tmp"]) await this.mkdirOwned(join(host, sub));
  }

  /** mkdir (failing if anything is already there) given to the run user. */
  private async mkdirOwned(path: string): Promise<void> {
    await mkdir(path, { mode: 0o700 });
    if (this.options.owner) await lchown(path, this.options.owner.uid, this.options.owner.gid);
  }

  /** A new file (O_EXCL: never through a symlink) given to the run user. */
  private async writeOwned(path: string, data: string | Buffer): Promise<void> {
    await writeFile(path, data, { mode: 0o600, flag: "wx" });
    if (this.options.owner) await lchown(path, this.options.owner.uid, this.options.owner.gid);
  }

  private removeLater(dir: string): void {
    const removal: Promise<void> = removeTree(dir)
      .catch((error: unknown) =>
        this.options.logger.warn("could not remove a run directory", { error: String(error) }),
      )
      .finally(() => this.cleanups.delete(removal));
    this.cleanups.add(removal);
  }
}
