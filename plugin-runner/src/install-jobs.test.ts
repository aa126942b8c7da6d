import { describe, expect, it } from "vitest";
import { DomainError, silentLogger } from "@stavrobot/common";
import type { InstallResponse } from "@stavrobot/common";
import { BackgroundTasks } from "./background.js";
import { InstallJobs, type Installer } from "./install-jobs.js";

const answer = (name: string): InstallResponse => ({ name, description: "d", message: "ok" });

function jobsWith(installer: Installer, options: { ttlMs?: number; maxFinished?: number } = {}) {
  let now = 1_000_000;
  const background = new BackgroundTasks(silentLogger);
  const jobs = new InstallJobs({ installer, background, logger: silentLogger, now: () => now, ...options });
  return { jobs, background, advance: (ms: number) => (now += ms) };
}

describe("InstallJobs", () => {
  it("keeps a finished job for the TTL, then forgets it", async () => {
    const { jobs, background, advance } = jobsWith({ install: async () => answer("a") }, { ttlMs: 1_000 });
    const id = jobs.start("https://example.com/a.git");
    await background.idle();
    expect(jobs.get(id)).toMatchObject({ state: "done", result: answer("a") });
    advance(999);
    expect(jobs.get(id)?.state).toBe("done");
    advance(1);
    expect(jobs.get(id)).toBeUndefined();
  });

  it("never forgets a running job, and keeps at most maxFinished finished ones (oldest go first)", async () => {
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow: Installer = {
      install: async (url, progress) => {
        if (url.includes("slow")) {
          progress?.("init");
          await gate;
        }
        return answer("x");
      },
    };
    const { jobs, background, advance } = jobsWith(slow, { ttlMs: 60_000, maxFinished: 2 });
    const running = jobs.start("https://example.com/slow.git");
    const done = [1, 2, 3].map((n) => jobs.start(`https://example.com/${n}.git`));
    await new Promise((resolve) => setTimeout(resolve, 10));
    jobs.start("https://example.com/4.git");
    expect(jobs.get(running)?.state).toBe("init");
    expect(jobs.get(done[0]!)).toBeUndefined();
    expect(jobs.get(done[2]!)?.state).toBe("done");
    advance(1);
    release();
    await background.idle();
    expect(jobs.get(running)?.state).toBe("done");
  });

  it("maps a domain error to the status the blocking call answers, and hides an unexpected one", async () => {
    const { jobs, background } = jobsWith({
      install: async (url) => {
        if (url.includes("taken")) throw new DomainError("conflict", 'Plugin "x" is already installed.');
        throw new Error("EACCES: /secret/path");
      },
    });
    const taken = jobs.start("https://example.com/taken.git");
    const broken = jobs.start("https://example.com/broken.git");
    await background.idle();
    expect(jobs.get(taken)).toMatchObject({
      state: "failed",
      status: 409,
      error: 'Plugin "x" is already installed.',
    });
    expect(jobs.get(broken)).toMatchObject({ state: "failed", status: 500, error: "Internal server error" });
  });

  it("refuses a URL git may not fetch before creating a job", () => {
    const { jobs } = jobsWith({ install: async () => answer("a") });
    expect(() => jobs.start("ext::sh -c evil")).toThrow(/Unsupported repository URL/);
  });
});
