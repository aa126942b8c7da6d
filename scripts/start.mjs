// `npm start`: runs the assistant from compiled JavaScript (no TypeScript loader at run time: a
// faster start and a smaller process). The sources are compiled first when they changed since the
// last build (or were never built), incrementally; then the launcher (app/src/start-local.ts, as
// app/dist/start-local.js) runs in this process.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const workspaces = ["common", "app", "plugin-runner", "python-runner", "coder", "signal-bridge"];
const stamp = join(root, "node_modules", ".cache", "stavrobot", "build-stamp");

/** The newest modification time among the sources and build settings of every workspace. */
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
    for (const file of ["tsconfig.json", "tsconfig.build.json", "package.json"]) {
      const path = join(root, workspace, file);
      if (existsSync(path)) newest = Math.max(newest, statSync(path).mtimeMs);
    }
  }
  return Math.max(newest, statSync(join(root, "tsconfig.json")).mtimeMs);
}

const built = existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
if (built < newestSource() || !existsSync(join(root, "app", "dist", "start-local.js"))) {
  process.stderr.write("Compiling the sources (only after they change)...\n");
  const projects = workspaces.filter((w) => w !== "common").map((w) => join(root, w, "tsconfig.build.json"));
  execFileSync(
    process.execPath,
    [join(root, "node_modules", "typescript", "bin", "tsc"), "-b", ...projects],
    {
      stdio: "inherit",
    },
  );
  mkdirSync(dirname(stamp), { recursive: true });
  writeFileSync(stamp, new Date().toISOString());
}

await import(pathToFileURL(join(root, "app", "dist", "start-local.js")).href);
