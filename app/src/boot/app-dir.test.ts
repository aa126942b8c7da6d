import { describe, expect, it } from "vitest";
import { appLayoutOf } from "./app-dir.js";

describe("appLayoutOf", () => {
  it("finds app/ from a module at any depth of the sources, the compiled output or the bundle", () => {
    expect(appLayoutOf("/srv/repo/app/src/web/pages.ts")).toEqual({
      appDir: "/srv/repo/app",
      rootDir: "/srv/repo",
      codeDir: "src",
    });
    expect(appLayoutOf("/srv/repo/app/dist/app.js").codeDir).toBe("dist");
    // A bundle holds every module in one file: the depth of each in src/ says nothing any more.
    expect(appLayoutOf("/srv/repo/app/bundle/start-local.js")).toEqual({
      appDir: "/srv/repo/app",
      rootDir: "/srv/repo",
      codeDir: "bundle",
    });
  });

  it("refuses a module outside a code directory", () => {
    expect(() => appLayoutOf("/srv/repo/app/other/x.js")).toThrow(/not inside app\/src/);
  });
});
