import { describe, expect, it } from "vitest";
import { loadPglite, usesServer } from "./pglite-load.js";

describe("which database", () => {
  it("is a server when DATABASE_URL or a PG* variable names one, else the embedded PGlite", () => {
    expect(usesServer({})).toBe(false);
    expect(usesServer({ DATABASE_URL: "" })).toBe(false);
    expect(usesServer({ DATABASE_URL: "postgres://db/stavrobot" })).toBe(true);
    expect(usesServer({ PGHOST: "db" })).toBe(true);
    expect(usesServer({ PGDATABASE: "stavrobot" })).toBe(true);
  });
});

describe("loading PGlite", () => {
  it("loads once per process: the launcher's early load is the one the app's open uses", async () => {
    const first = loadPglite();
    expect(loadPglite()).toBe(first);
    const { library, wasmModule } = await first;
    expect(typeof library.PGlite.create).toBe("function");
    // Compiled already: PGlite instantiates it instead of reading and compiling the file again
    // (every PGlite test opens its database through it).
    expect(Object.prototype.toString.call(wasmModule)).toBe("[object WebAssembly.Module]");
  });
});
