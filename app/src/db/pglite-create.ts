/**
 * Creating the embedded database without running PostgreSQL's initdb in the app's process.
 *
 * PGlite runs initdb inside the WebAssembly memory of the process that opens an empty directory,
 * beside a second instance and a copy of the new data directory, and a WebAssembly memory never
 * shrinks: the app kept ~450 MB more for as long as it ran after its first start. Here a new
 * database is instead copied from a prepared one (a database created and migrated by a
 * short-lived child process, kept per PGlite version and schema), or, when no prepared one can be
 * kept, made by that child straight into place. Either way it is built beside the data directory
 * and renamed into place, so a start interrupted meanwhile never leaves half a database.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { constants, existsSync, readFileSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, open, readFile, readdir, rename, rm, rmdir } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "@stavrobot/common";
import { APP_LAYOUT } from "../boot/app-dir.js";
import { migrations } from "./migrations.js";
import { pgliteBuildDir } from "./pglite-load.js";

export interface EnsureOptions {
  /** Where prepared databases are kept; made when missing. */
  templateDir: string;
  logger?: Logger;
}

/** How the database came to be in its directory. */
export type Creation = "existing" | "template" | "child";

/** The default home of prepared databases: beside the bundles' stamp, in node_modules' cache. */
export function defaultTemplateDir(): string {
  return join(APP_LAYOUT.rootDir, "node_modules", ".cache", "stavrobot", "pglite");
}

/**
 * Makes sure `dataDir` holds a database. A directory holding files but no database (a creation
 * interrupted by an older version, or files put there by hand) is moved aside, never deleted.
 */
export async function ensureEmbeddedDatabase(dataDir: string, options: EnsureOptions): Promise<Creation> {
  if (existsSync(join(dataDir, "PG_VERSION"))) return "existing";
  const started = performance.now();
  await moveAsideIfNotEmpty(dataDir, options.logger);
  const parent = dirname(dataDir);
  await mkdir(parent, { recursive: true });
  await removeStaleStaging(dataDir);
  const staging = await mkdtemp(join(parent, `.${basename(dataDir)}.creating-`));
  try {
    const how = await fillStaging(staging, options);
    if (!existsSync(join(staging, "PG_VERSION"))) {
      throw new Error(`creating the embedded database in ${dataDir} left no database behind`);
    }
    if (existsSync(dataDir)) await rmdir(dataDir);
    await rename(staging, dataDir);
    options.logger?.info("created the embedded database", {
      dir: dataDir,
      from: how === "template" ? "prepared database" : "new process",
      ms: Math.round(performance.now() - started),
    });
    return how;
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
}

async function fillStaging(staging: string, options: EnsureOptions): Promise<"template" | "child"> {
  const template = await preparedDatabase(options.templateDir).catch((error: unknown) => {
    options.logger?.warn("no prepared embedded database; creating one in a new process", {
      reason: (error as Error).message,
    });
    return undefined;
  });
  if (template) {
    try {
      await copyTree(template, staging);
      return "template";
    } catch (error) {
      // Removed meanwhile (a newer schema's prepared database replaced it): made afresh instead.
      options.logger?.warn("could not copy the prepared embedded database", {
        reason: (error as Error).message,
      });
      await rm(staging, { recursive: true, force: true });
      await mkdir(staging, { mode: 0o700 });
    }
  }
  await createInChild(staging);
  return "child";
}

/** Files copied at once by copyTree. */
const COPIES_AT_ONCE = 16;

/**
 * `source`'s directories and files copied into the empty directory `target`, many files at once,
 * none replaced. A prepared database is ~1,000 files: fs.cp copies them one at a time, 4× slower
 * (0.42 s against 0.1 s here), and that was most of a first start.
 */
async function copyTree(source: string, target: string): Promise<void> {
  const files: string[] = [];
  const walk = async (relative: string): Promise<void> => {
    for (const entry of await readdir(join(source, relative), { withFileTypes: true })) {
      const name = join(relative, entry.name);
      if (entry.isDirectory()) {
        await mkdir(join(target, name), { mode: 0o700 });
        await walk(name);
      } else if (entry.isFile()) {
        files.push(name);
      }
    }
  };
  await walk("");
  let next = 0;
  const copier = async (): Promise<void> => {
    for (let name = files[next++]; name !== undefined; name = files[next++]) {
      await copyFile(
        join(source, name),
        join(target, name),
        constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE,
      );
    }
  };
  await Promise.all(Array.from({ length: COPIES_AT_ONCE }, copier));
}

/**
 * A prepared database for this PGlite and this schema: `<templateDir>/<key>`, made once by a
 * child process under a lock (test files and starts running at once make it once, not each).
 * Throws when it cannot be kept there (a read-only install).
 */
export async function preparedDatabase(templateDir: string): Promise<string> {
  const key = templateKey();
  const ready = join(templateDir, key);
  if (existsSync(join(ready, "PG_VERSION"))) return ready;
  await mkdir(templateDir, { recursive: true });
  const release = await lock(join(templateDir, `${key}.lock`), () => existsSync(join(ready, "PG_VERSION")));
  if (!release) return ready;
  try {
    if (existsSync(join(ready, "PG_VERSION"))) return ready;
    const building = await mkdtemp(join(templateDir, `.${key}.building-`));
    try {
      await createInChild(building);
      await rm(ready, { recursive: true, force: true });
      await rename(building, ready);
    } catch (error) {
      await rm(building, { recursive: true, force: true });
      throw error;
    }
    await removeOtherTemplates(templateDir, key);
    return ready;
  } finally {
    await release();
  }
}

/** The PGlite version and a digest of the migrations and settings a prepared database was made with. */
export function templateKey(): string {
  const manifest = JSON.parse(readFileSync(join(pgliteBuildDir(), "..", "package.json"), "utf8")) as {
    version: string;
  };
  const digest = createHash("sha256").update(JSON.stringify(migrations)).digest("hex").slice(0, 16);
  return `pglite-${manifest.version}-${digest}`;
}

/**
 * Runs PostgreSQL's initdb and the migrations in a new process, into the empty directory `dir`;
 * the memory initdb takes is that process's, returned to the system when it exits.
 */
export async function createInChild(dir: string): Promise<void> {
  const { rootDir, appDir, codeDir } = APP_LAYOUT;
  const args =
    codeDir === "src"
      ? ["--conditions=source", "--import", "tsx", join(appDir, "src", "boot", "create-database.ts")]
      : [
          join(
            appDir,
            codeDir,
            codeDir === "bundle" ? "create-database.js" : join("boot", "create-database.js"),
          ),
        ];
  const child = spawn(process.execPath, [...args, dir], {
    cwd: rootDir,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (exitCode, signal) => resolve(signal ? null : exitCode));
  });
  if (code !== 0) {
    const said = stderr.trim().split("\n").slice(-6).join(" / ");
    throw new Error(
      `creating the embedded database failed (${code === null ? "killed" : `exit ${code}`}): ${said}`,
    );
  }
}

/**
 * An exclusive lock as a file holding its owner's pid; a lock whose owner is gone is taken over.
 * While another process holds it, waits until `done()` (resolves undefined) or the lock is free.
 */
async function lock(path: string, done: () => boolean): Promise<(() => Promise<void>) | undefined> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    try {
      const file = await open(path, "wx", 0o600);
      await file.writeFile(String(process.pid));
      await file.close();
      return () => rm(path, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    if (done()) return undefined;
    const owner = Number(await readFile(path, "utf8").catch(() => ""));
    if (Number.isInteger(owner) && owner > 0 && !alive(owner)) {
      await rm(path, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`${path} is held by process ${owner} for too long`);
    await sleep(100);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A data directory with files but no database is renamed `<dir>.incomplete-<time>` and reported. */
async function moveAsideIfNotEmpty(dataDir: string, logger?: Logger): Promise<void> {
  const entries = await readdir(dataDir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [];
    throw error;
  });
  if (entries.length === 0) return;
  const aside = `${dataDir}.incomplete-${new Date().toISOString().replaceAll(":", "-")}`;
  await rename(dataDir, aside);
  logger?.warn(
    `${dataDir} held files but no database (PG_VERSION is missing: a creation was interrupted?); ` +
      `moved them to ${aside} and created a new database. Delete that directory once you have checked it.`,
  );
}

/** Staging directories of creations interrupted before (the instance lock says none is running). */
async function removeStaleStaging(dataDir: string): Promise<void> {
  const prefix = `.${basename(dataDir)}.creating-`;
  const parent = dirname(dataDir);
  for (const name of await readdir(parent)) {
    if (name.startsWith(prefix)) await rm(join(parent, name), { recursive: true, force: true });
  }
}

/** Prepared databases of other PGlite versions or schemas, and builds that were interrupted. */
async function removeOtherTemplates(templateDir: string, key: string): Promise<void> {
  for (const name of await readdir(templateDir)) {
    if (name === key || name.endsWith(".lock") || name.startsWith(`.${key}.building-`)) continue;
    await rm(join(templateDir, name), { recursive: true, force: true });
  }
}
