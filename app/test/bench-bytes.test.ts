import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { benchFakePath, bytesToTheModel } from "../bench/bytes.js";
import { repoRoot } from "./helpers/process.js";

// The bench's bytes figure is a ratio to the reference's, measured on the team's shared fake only:
// where the fake is not found, it says the figure was not measured instead of measuring another
// workload.
describe("npm run bench: bytes to the model", () => {
  it("looks for the shared fake beside the repository, or where STAVROBOT_BENCH_FAKE says", () => {
    expect(benchFakePath({})).toBe(join(repoRoot, "..", "shared", "bench", "fake-anthropic.mjs"));
    expect(benchFakePath({ STAVROBOT_BENCH_FAKE: "/elsewhere/fake.mjs" })).toBe("/elsewhere/fake.mjs");
  });

  it("says the figure was not measured when the fake is absent, and how to name it", async () => {
    const missing = join(repoRoot, "no-such-dir", "fake-anthropic.mjs");
    expect(await bytesToTheModel({ STAVROBOT_BENCH_FAKE: missing })).toEqual([
      `bytes to the model: NOT MEASURED: the shared benchmark fake is not at ${missing} (set ` +
        "STAVROBOT_BENCH_FAKE to its fake-anthropic.mjs); the ratio to the reference's 891,508 bytes " +
        "holds only on that fake's workload.",
    ]);
  });
});
