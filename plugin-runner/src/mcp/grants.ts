import { chown, mkdir, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { errorMessage, runProcess, which, writeFileAtomic } from "@stavrobot/common";
import type { Logger, Owner } from "@stavrobot/common";
import type { NamedPath } from "./named-paths.js";

/** One write access given to a server's user on a path the owner named. */
interface Granted {
  path: string;
  /** The folder and all it holds (default entries too, for what is made in it later). */
  tree: boolean;
}

/** What was given, by server: its user's uid and each path. */
type GrantRecord = Record<string, { uid: number; granted: Granted[] }>;

const ACL_TIMEOUT_MS = 120_000;

/**
 * Write access for a stdio server's own Unix user (the runner as root) to the paths its owner
 * named writable: the user must be able to write there, yet the owner's folders stay theirs. So
 * nothing of the owner's is chowned: a POSIX ACL entry names the server's user (`setfacl -m
 * u:<uid>:rwX`, on a named folder with everything in it and a default entry for what is made there
 * later; on a named file; on a new file's existing folder alone). A folder the runner creates for a
 * new file is the server's own. Every entry given is recorded (`mcp-grants.json` in the runner's
 * state) and taken back when the path is no longer named, the server is no longer declared, or
 * before its user is removed (a later user with the same uid inherits nothing). Without `setfacl`
 * (the `acl` package) nothing is given and the log says which command would.
 */
export class McpGrants {
  private serial: Promise<unknown> = Promise.resolve();
  private warnedNoAcl = false;

  constructor(
    private readonly file: string | undefined,
    private readonly logger: Logger,
    /** setfacl's path; null: there is none. */
    private readonly setfacl: string | null = which("setfacl", process.env.PATH ?? "/usr/bin:/bin") ?? null,
  ) {}

  /**
   * Makes the folders new files need, and (with a user of the server's own) gives that user write
   * access to the writable named paths, taking back what it had that is no longer named.
   */
  prepare(server: string, paths: readonly NamedPath[], owner: Owner | undefined): Promise<void> {
    return this.turn(async () => {
      for (const named of paths) {
        if (named.kind !== "folder" || named.exists) continue;
        await mkdir(dirname(named.path), { recursive: true, mode: 0o755 });
        await mkdir(named.path, { recursive: true, mode: 0o700 });
        if (owner) await chown(named.path, owner.uid, owner.gid);
      }
      const record = await this.read();
      const wanted: Granted[] = owner
        ? paths.flatMap((named): Granted[] =>
            named.kind === "data" && named.writable
              ? [{ path: named.path, tree: named.directory }]
              : named.kind === "folder" && named.exists
                ? [{ path: named.path, tree: false }]
                : [],
          )
        : [];
      const before = record[server];
      const keep = (granted: Granted) =>
        before?.uid === owner?.uid && wanted.some((want) => same(want, granted));
      for (const granted of before?.granted ?? []) if (!keep(granted)) await this.take(before!.uid, granted);
      const given: Granted[] = [];
      for (const want of wanted) {
        // Given at an earlier start: what was made there since has the default entry already.
        if (before?.granted.some((granted) => same(granted, want)) && before.uid === owner?.uid)
          given.push(want);
        else if (owner && (await this.give(server, owner.uid, want))) given.push(want);
      }
      if (given.length > 0 && owner) record[server] = { uid: owner.uid, granted: given };
      else delete record[server];
      await this.write(record);
    });
  }

  /** Takes back everything given to `server`'s user (it is no longer declared, or its user goes). */
  revoke(server: string): Promise<void> {
    return this.turn(async () => {
      const record = await this.read();
      const before = record[server];
      if (!before) return;
      for (const granted of before.granted) await this.take(before.uid, granted);
      delete record[server];
      await this.write(record);
    });
  }

  /** At start: what was given to servers no longer declared is taken back. */
  async revokeAllBut(declared: readonly string[]): Promise<void> {
    const record = await this.turn(() => this.read());
    for (const server of Object.keys(record)) if (!declared.includes(server)) await this.revoke(server);
  }

  private async give(server: string, uid: number, granted: Granted): Promise<boolean> {
    const entry = `u:${uid}:rwX`;
    const args = granted.tree
      ? ["-R", "-m", `${entry},d:${entry}`, granted.path]
      : ["-m", entry, granted.path];
    if (!this.setfacl) {
      if (!this.warnedNoAcl)
        this.logger.warn(
          "cannot give an MCP server's user write access to the paths its declaration names: setfacl (Debian package acl) is not installed",
          { server, run: `setfacl ${args.join(" ")}` },
        );
      this.warnedNoAcl = true;
      return false;
    }
    const result = await this.acl(args);
    if (result) {
      this.logger.warn("could not give an MCP server's user write access to a path it names", {
        server,
        path: granted.path,
        error: result,
      });
      return false;
    }
    this.logger.info("gave an MCP server's user write access (an ACL entry) to a path it names", {
      server,
      path: granted.path,
      uid,
    });
    return true;
  }

  private async take(uid: number, granted: Granted): Promise<void> {
    const args = granted.tree
      ? ["-R", "-x", `u:${uid},d:u:${uid}`, granted.path]
      : ["-x", `u:${uid}`, granted.path];
    const result = await this.acl(args);
    // A path that is gone has nothing left to take back.
    if (result && !/No such file/i.test(result))
      this.logger.warn("could not take back an MCP server's write access", {
        path: granted.path,
        error: result,
      });
  }

  /** Runs setfacl; the error text, or undefined when it worked. */
  private async acl(args: string[]): Promise<string | undefined> {
    if (!this.setfacl) return "setfacl is not installed";
    const result = await runProcess({
      command: this.setfacl,
      args,
      cwd: "/",
      env: { PATH: "/usr/bin:/bin" },
      timeoutMs: ACL_TIMEOUT_MS,
      stdoutLimitBytes: 16 * 1024,
      stderrLimitBytes: 16 * 1024,
      killGraceMs: 1_000,
    });
    if (result.exitCode === 0) return undefined;
    return (result.stderr.trim() || result.spawnError || `exit ${result.exitCode}`).slice(0, 500);
  }

  private async read(): Promise<GrantRecord> {
    if (!this.file) return {};
    try {
      return JSON.parse(await readFile(this.file, "utf8")) as GrantRecord;
    } catch {
      return {};
    }
  }

  private async write(record: GrantRecord): Promise<void> {
    if (!this.file) return;
    try {
      await mkdir(dirname(this.file), { recursive: true, mode: 0o700 });
      await writeFileAtomic(this.file, JSON.stringify(record, null, 2) + "\n", undefined, 0o600);
    } catch (error) {
      this.logger.warn("could not record the MCP servers' write access", { error: errorMessage(error) });
    }
  }

  private turn<T>(work: () => Promise<T>): Promise<T> {
    const next = this.serial.then(work, work);
    this.serial = next.catch(() => undefined);
    return next;
  }
}

function same(a: Granted, b: Granted): boolean {
  return a.path === b.path && a.tree === b.tree;
}
