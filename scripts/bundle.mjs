// The bundles `npm start` runs: each service's entry and what it imports, our sources and the
// libraries alike, in one file per service (plus chunks loaded on demand, such as the providers
// of models not configured). Node loads one file much faster than the ~1,000 small modules the
// app's libraries are made of (typebox alone is ~680): see DECISIONLOG.md.
//
// Each service's bundle goes to `<service>/bundle/`, beside its `src/` and `dist/`, so paths the
// code finds from its own location (the web UI's files, the coder's prompts) stay the same.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

/**
 * Each service and its entries under `src/`: one, or several by output name (the app's second is
 * the short-lived process that creates the embedded database, its third `npm install`'s step that
 * keeps a prepared one: prepare.mjs).
 */
export const ENTRIES = {
  app: {
    "start-local": "boot/start-local.ts",
    "create-database": "boot/create-database.ts",
    "prepare-database": "boot/prepare-database.ts",
  },
  "plugin-runner": "main.ts",
  "python-runner": "main.ts",
  coder: "main.ts",
  "signal-bridge": "main.ts",
  "whatsapp-bridge": "main.ts",
};

/**
 * Left to Node at run time: PGlite, its pgvector extension and proxy-agent (Bedrock behind a
 * proxy) find files beside their own modules; the other two are optional imports of libraries (pg's native binding,
 * Mistral's telemetry) that are not installed.
 */
const EXTERNAL = [
  "@electric-sql/pglite",
  "@electric-sql/pglite-pgvector",
  "proxy-agent",
  "pg-native",
  "@opentelemetry/api",
];

/** Libraries written as CommonJS call `require` (for Node's own modules), which ESM lacks. */
const BANNER =
  'import { createRequire as __stavrobotRequire } from "node:module";\n' +
  "const require = __stavrobotRequire(import.meta.url);";

/** Bundles every service of the repository at `root` (replacing earlier bundles). */
export async function bundleAll(root) {
  await Promise.all(
    Object.entries(ENTRIES).map(([service, entry]) => {
      const outdir = join(root, service, "bundle");
      rmSync(outdir, { recursive: true, force: true });
      return build({
        entryPoints:
          typeof entry === "string"
            ? [join(root, service, "src", entry)]
            : Object.fromEntries(
                Object.entries(entry).map(([name, path]) => [name, join(root, service, "src", path)]),
              ),
        outdir,
        bundle: true,
        splitting: true,
        format: "esm",
        platform: "node",
        target: "node20",
        // Our own packages from their TypeScript sources: no separate compile step.
        conditions: ["source"],
        external: EXTERNAL,
        banner: { js: BANNER },
        // Error names and class names in logs stay the ones in the sources.
        keepNames: true,
        // Without comments and whitespace (names kept) there is a third less for V8 to parse at
        // every start: 8.4 MB of JavaScript became 5.8 MB (DECISIONLOG.md).
        minifyWhitespace: true,
        minifySyntax: true,
        sourcemap: "linked",
        logLevel: "warning",
      });
    }),
  );
}
