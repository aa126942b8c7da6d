/**
 * Whether the embedded database is used and, when it is, PGlite's library and its compiled
 * WebAssembly, loaded once per process. The launcher starts the load before it imports the app's
 * own modules: the 9 MB file is read and compiled (on V8's background thread) while they load and,
 * at a first start, while the database is copied, and the app's open finds it done or under way.
 * Compiled that early, the idle app held 8 MB less and a start took the same time within its
 * noise (DECISIONLOG.md: "PGlite's WebAssembly is compiled as the start begins").
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { setFlagsFromString } from "node:v8";
import type { PGliteOptions } from "@electric-sql/pglite";

/**
 * How V8 compiles PGlite's WebAssembly (~14,000 functions). Read when a compile starts, so they
 * are set before PGlite is loaded.
 * - One background thread instead of one per core: each thread's allocator kept its share of the
 *   compiler's memory after the compile (20–40 MB of the idle app), and one compiles it as fast.
 * - Only the baseline compiler (Liftoff), never the optimising one (TurboFan): what it optimised
 *   stayed in the process as code and compile memory (25–40 MB of the idle app, 35 MB of its
 *   peak), and on two cores its compiles competed with the start and the first turns. Statements
 *   run ~12% slower in a long loop of them, but a turn was no slower and the first `/chat` after a
 *   start twice as fast in the bench (DECISIONLOG.md).
 */
const WASM_COMPILE_FLAGS = "--wasm-num-compilation-tasks=1 --liftoff-only";

type WasmModule = NonNullable<PGliteOptions["pgliteWasmModule"]>;

/** V8's WebAssembly global, which the TypeScript libraries this project uses (no DOM) leave out. */
const { WebAssembly: wasm } = globalThis as unknown as {
  WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> };
};

export interface LoadedPglite {
  library: Awaited<ReturnType<typeof importLibrary>>;
  /**
   * pgvector for PGlite (50 KB; its library is loaded into the database only when a vector is
   * first used). Every open names it: an index of its kind cannot even be opened without it.
   */
  vector: Awaited<ReturnType<typeof importVector>>["vector"];
  /** PostgreSQL's WebAssembly, compiled (PGlite's `pgliteWasmModule` option). */
  wasmModule: WasmModule;
}

const importLibrary = () => import("@electric-sql/pglite");
const importVector = () => import("@electric-sql/pglite-pgvector");

/** A PostgreSQL server is named (DATABASE_URL or PG* variables); otherwise the embedded PGlite is used. */
export function usesServer(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.DATABASE_URL || env.PGHOST || env.PGDATABASE);
}

/** PGlite's built files: its entry, `pglite.wasm` beside it, its package.json one level up. */
export function pgliteBuildDir(): string {
  return dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"));
}

let loading: Promise<LoadedPglite> | undefined;

/** PGlite, loaded on the first call; every later call gets the same load (and its failure). */
export function loadPglite(): Promise<LoadedPglite> {
  return (loading ??= (async () => {
    setFlagsFromString(WASM_COMPILE_FLAGS);
    // Where PGlite itself reads it from.
    const wasmFile = join(pgliteBuildDir(), "pglite.wasm");
    const [library, { vector }, bytes] = await Promise.all([
      importLibrary(),
      importVector(),
      readFile(wasmFile),
    ]);
    return { library, vector, wasmModule: await wasm.compile(bytes) };
  })());
}
