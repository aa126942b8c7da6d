// `npm start`: runs the assistant from bundled JavaScript (no TypeScript loader at run time, and
// one file per service to load instead of ~1,000 modules: a faster start and a smaller process).
// The services are bundled first when a source changed since the last bundle (or none exists);
// that takes a second or two. Then the launcher (app/src/boot/start-local.ts, as app/bundle/start-local.js)
// runs in this process and starts the sibling services from their bundles.
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const workspaces = ["common", "app", "plugin-runner", "python-runner", "coder", "signal-bridge"];
const stamp = join(root, "node_modules", ".cache", "stavrobot", "bundle-stamp");
const launcher = join(root, "app", "bundle", "start-local.js");

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

const built = existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
if (built < newestSource() || !existsSync(launcher)) {
  process.stderr.write("Bundling the services (only after a source or library changes)...\n");
  const { bundleAll } = await import("./bundle.mjs");
  await bundleAll(root);
  mkdirSync(dirname(stamp), { recursive: true });
  writeFileSync(stamp, new Date().toISOString());
}

await import(pathToFileURL(launcher).href);
