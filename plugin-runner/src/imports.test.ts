import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The plugin-runner's modules import each other one way (STYLE.md, "Arrows point one way"): no
// circle, and the formats sit behind the seam (formats/format.ts, formats/index.ts), so only the
// composition root names a format. Read from the sources, so a new import that breaks either rule
// fails here, naming it.

const SRC = dirname(fileURLToPath(import.meta.url));

/** The one module that makes the formats and hands them to the registry, the executor and the routes. */
const COMPOSITION_ROOT = "host.ts";

/** The seam and what every format shares: in formats/, but not a format. */
const SEAM = new Set(["formats/format.ts", "formats/index.ts", "formats/json-schema.ts"]);

/** A format's own module: formats/ beyond the seam, the MCP client (mcp/) and Osaurus packages (osaurus/). */
function isFormatModule(module: string): boolean {
  if (module.startsWith("mcp/") || module.startsWith("osaurus/")) return true;
  return module.startsWith("formats/") && !SEAM.has(module);
}

/** Every non-test module under src/, as a path relative to it with `/` separators. */
function modules(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return modules(path);
    if (!entry.name.endsWith(".ts") || entry.name.endsWith(".test.ts")) return [];
    return [relative(SRC, path).split("\\").join("/")];
  });
}

/** Relative imports (`import`, `import type`, `export … from`, `import("…")`) of one module. */
function relativeImports(module: string, source: string): string[] {
  const found = new Set<string>();
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)"(\.\.?\/[^"]+)"/g;
  for (const match of source.matchAll(pattern)) {
    const target = normalize(join(dirname(module), match[1] as string))
      .split("\\")
      .join("/")
      .replace(/\.js$/, ".ts");
    found.add(target);
  }
  return [...found];
}

function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const module of modules()) {
    graph.set(module, relativeImports(module, readFileSync(join(SRC, module), "utf8")));
  }
  return graph;
}

/** One import circle, as the modules along it (first repeated at the end), or undefined when there is none. */
function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const visit = (module: string): string[] | undefined => {
    if (onPath.has(module)) return [...path.slice(path.indexOf(module)), module];
    if (done.has(module) || !graph.has(module)) return undefined;
    path.push(module);
    onPath.add(module);
    for (const target of graph.get(module) ?? []) {
      const cycle = visit(target);
      if (cycle) return cycle;
    }
    path.pop();
    onPath.delete(module);
    done.add(module);
    return undefined;
  };
  for (const module of [...graph.keys()].sort()) {
    const cycle = visit(module);
    if (cycle) return cycle;
  }
  return undefined;
}

describe("the plugin-runner's imports", () => {
  const graph = importGraph();

  it("are read from the sources (the check below sees real imports)", () => {
    expect(graph.size).toBeGreaterThan(40);
    expect(graph.get(COMPOSITION_ROOT)).toContain("formats/mcp.ts");
    expect(graph.get("plugins.ts")).toContain("formats/format.ts");
    // Every relative import names a module that exists: a path this reader gets wrong shows here.
    const missing = [...graph].flatMap(([module, targets]) =>
      targets.filter((target) => !graph.has(target)).map((target) => `${module} -> ${target}`),
    );
    expect(missing).toEqual([]);
  });

  it("finds a circle where there is one", () => {
    const circle = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts"]],
      ["d.ts", ["a.ts"]],
    ]);
    expect(findCycle(circle)).toEqual(["a.ts", "b.ts", "c.ts", "a.ts"]);
    expect(
      findCycle(
        new Map([
          ["a.ts", ["b.ts"]],
          ["b.ts", []],
        ]),
      ),
    ).toBeUndefined();
    expect(relativeImports("mcp/x.ts", 'import type { A } from "../formats/format.js";')).toEqual([
      "formats/format.ts",
    ]);
  });

  it("form no circle", () => {
    expect(findCycle(graph)).toBeUndefined();
  });

  it("name a format only inside the formats and in the composition root", () => {
    const crossings = [...graph].flatMap(([module, targets]) =>
      module === COMPOSITION_ROOT || isFormatModule(module)
        ? []
        : targets.filter(isFormatModule).map((target) => `${module} -> ${target}`),
    );
    expect(crossings).toEqual([]);
  });

  it("tell a format's module from the seam", () => {
    expect(isFormatModule("formats/mcp.ts")).toBe(true);
    expect(isFormatModule("formats/stavrobot-run.ts")).toBe(true);
    expect(isFormatModule("mcp/server.ts")).toBe(true);
    expect(isFormatModule("osaurus/install.ts")).toBe(true);
    expect(isFormatModule("formats/format.ts")).toBe(false);
    expect(isFormatModule("formats/index.ts")).toBe(false);
    expect(isFormatModule("plugins.ts")).toBe(false);
  });
});
