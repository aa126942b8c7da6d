// What a start needs made once per install, made by `npm install` (package.json's postinstall)
// so that the first `npm start` starts as fast as the next ones:
// - the bundles `npm start` runs (`bundle.mjs`), when a source or library changed since the last;
// - the prepared embedded database a new data directory is copied from (initdb and the
//   migrations in a short-lived process: app/src/db/pglite-create.ts).
// Neither is required: `npm start` makes whatever is missing. So a failure here is reported and
// `npm install` still succeeds.
//
// `npm start` (start.mjs) calls `bundleIfStale` from here too.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const workspaces = [
  "common",
  "app",
  "plugin-runner",
  "python-runner",
  "coder",
  "signal-bridge",
  "whatsapp-bridge",
];
const cache = join(root, "node_modules", ".cache", "stavrobot");
const stamp = join(cache, "bundle-stamp");
const bundleLock = join(cache, "bundle.lock");
/** The launcher `npm start` runs (app/src/boot/start-local.ts, bundled). */
export const launcher = join(root, "app", "bundle", "start-local.js");

/** The newest modification time among the sources and settings of every workspace and the lock file. */
function newestSource() {
  let newest = 0;
  const visit = (path) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) visit(child);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts"))
        newest = Math.max(newest, statSync(child).mtimeMs);
    }
  };
  for (const workspace of workspaces) {
    visit(join(root, workspace, "src"));
    const manifest = join(root, workspace, "package.json");
    if (existsSync(manifest)) newest = Math.max(newest, statSync(manifest).mtimeMs);
  }
  // Libraries are bundled too: `npm install` and `npm ci` rewrite node_modules' own lock file.
  for (const file of ["package-lock.json", "node_modules/.package-lock.json", "scripts/bundle.mjs"]) {
    const path = join(root, file);
    if (existsSync(path)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

function stale() {
  const built = existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
  return built < newestSource() || !existsSync(launcher);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}

/**
 * Bundles the services when a source or library changed since the last bundle (or none exists).
 * One process bundles at a time (a file holding its pid; one whose owner is gone is taken over):
 * a bundle replaces the directories another start would be loading from.
 */
export async function bundleIfStale() {
  if (!stale()) return;
  mkdirSync(cache, { recursive: true });
  const deadline = Date.now() + 300_000;
  for (;;) {
    try {
      writeFileSync(bundleLock, String(process.pid), { flag: "wx", mode: 0o600 });
      break;
    } catch (error) {
      if (error.code !== "EEXIST") throw error;
    }
    let owner;
    try {
      owner = Number(readFileSync(bundleLock, "utf8"));
    } catch {
      continue; // Released meanwhile.
    }
    if (Number.isInteger(owner) && owner > 0 && !alive(owner)) rmSync(bundleLock, { force: true });
    else if (Date.now() > deadline) throw new Error(`${bundleLock} is held by process ${owner} for too long`);
    else await sleep(100);
  }
  try {
    // Another process may have bundled while this one waited.
    if (!stale()) return;
    process.stderr.write("Bundling the services (only after a source or library changes)...\n");
    const { bundleAll } = await import("./bundle.mjs");
    await bundleAll(root);
    writeFileSync(stamp, new Date().toISOString());
  } finally {
    rmSync(bundleLock, { force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const say = (text) => process.stderr.write(`${text}\n`);
  try {
    await bundleIfStale();
  } catch (error) {
    say(`Could not bundle the services: ${error instanceof Error ? error.message : String(error)}`);
    say("npm start will try again.");
    process.exit(0);
  }
  // The bundled step that keeps a prepared embedded database (PGLITE_TEMPLATE_DIR or the default);
  // it says what went wrong itself.
  const result = spawnSync(process.execPath, [join(root, "app", "bundle", "prepare-database.js")], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (result.error || result.status !== 0) {
    say(
      `Could not prepare the embedded database (${result.error?.message ?? `exit ${result.status}`}): ` +
        "the first npm start on an empty one will make it, a few seconds more.",
    );
  }
}
