import { describe, expect, it } from "vitest";
import { bwrapArgs, bwrapProbeArgs } from "./bwrap.js";

const system = [{ kind: "bind" as const, source: "/usr", target: "/usr" }];
const run = { system, mounts: [], network: true, cwd: "/", command: ["/bin/true"] };

describe("bwrapArgs", () => {
  it("makes the namespaces directly with a /proc of the run's own by default", () => {
    const argv = bwrapArgs(run);
    expect(argv).not.toContain("--userns");
    expect(argv.join(" ")).toContain("--proc /proc");
  });

  it("in a user namespace: enters the one passed as descriptor 3, and can show the service's /proc", () => {
    const argv = bwrapArgs({ ...run, place: { userns: true, proc: "shared" } });
    expect(argv.slice(0, 2)).toEqual(["--userns", "3"]);
    expect(argv.join(" ")).toContain("--ro-bind /proc /proc");
    expect(argv).not.toContain("--proc");
    const probe = bwrapProbeArgs(system, { userns: true, proc: "private" });
    expect(probe.slice(0, 2)).toEqual(["--userns", "3"]);
    expect(probe.join(" ")).toContain("--proc /proc");
  });
});
