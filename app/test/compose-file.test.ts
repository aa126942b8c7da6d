import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NPM_START, NPM_START_ENV, repoRoot } from "./helpers/process.js";

/** Seconds of a compose duration such as `2s`, `1m30s` or `1h`. */
function seconds(duration: string): number {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  let total = 0;
  for (const [, value, unit] of duration.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) {
    total += Number(value) * (units[unit as string] as number);
  }
  return total;
}

describe("docker-compose.yml", () => {
  it("checks every service's health at least once a minute (services waiting for a healthy one never wait an hour)", () => {
    for (const file of ["docker-compose.yml", "docker-compose.harbormaster.yml"]) {
      const text = readFileSync(join(repoRoot, file), "utf8");
      const intervals = [...text.matchAll(/^\s+interval:\s*(\S+)/gm)].map((match) => match[1] as string);
      for (const interval of intervals)
        expect(seconds(interval), `${file}: interval ${interval}`).toBeLessThanOrEqual(60);
    }
  });

  it("mounts nothing over a service's code (the images keep each workspace under /srv/<name>)", () => {
    const workspaces = ["common", "app", "plugin-runner", "python-runner", "coder", "signal-bridge"];
    for (const file of ["docker-compose.yml", "docker-compose.harbormaster.yml"]) {
      const text = readFileSync(join(repoRoot, file), "utf8");
      const targets = [...text.matchAll(/^\s+- "?[^":\n]+:(\/[^":\s]*)/gm)].map(
        (match) => match[1] as string,
      );
      expect(targets.length, file).toBeGreaterThan(5);
      for (const target of targets)
        for (const workspace of workspaces)
          expect(
            target === `/srv/${workspace}` || target.startsWith(`/srv/${workspace}/`),
            `${file}: ${target}`,
          ).toBe(false);
    }
  });
});

describe("the app's image", () => {
  it("gives the C allocator the settings `npm start` gives it", () => {
    const dockerfile = readFileSync(join(repoRoot, "app/Dockerfile"), "utf8");
    const variables = Object.keys(NPM_START_ENV).filter((name) => name.startsWith("MALLOC_"));
    expect(variables).toContain("MALLOC_TRIM_THRESHOLD_");
    for (const name of variables) expect(dockerfile).toContain(`${name}=${NPM_START_ENV[name]}`);
  });

  it("runs node with the flags `npm start` runs it with", () => {
    const dockerfile = readFileSync(join(repoRoot, "app/Dockerfile"), "utf8");
    const flags = NPM_START.filter((arg) => arg.startsWith("--"));
    expect(flags).toContain("--max-semi-space-size=2");
    const command = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1];
    expect(JSON.parse(command ?? "[]")).toEqual(["node", ...flags, "app/dist/boot/main.js"]);
  });
});
