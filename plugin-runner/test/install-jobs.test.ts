import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { GitDaemon, Json, TestPluginHost } from "./helpers.js";
import { SECRET, git, makeTempRoot, startGitDaemon, startPluginHost, uniqueName } from "./helpers.js";

/**
 * `POST /install` with `Prefer: respond-async`: a job that reports cloning, init, then done or
 * failed, against a real git daemon; the blocking install is unchanged (git-lifecycle.test.ts).
 */

/** A plugin repository whose init waits for a file named `go` in the plugin directory. */
function writeGatedRepo(dir: string, name: string): void {
  mkdirSync(join(dir, "hello"), { recursive: true });
  writeFileSync(
    join(dir, "manifest.json"),
    JSON.stringify({ name, description: "Gated init", init: { entrypoint: "init.sh" } }),
  );
  writeFileSync(
    join(dir, "init.sh"),
    "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.05; done\necho 'init finished'\n",
    { mode: 0o755 },
  );
  writeFileSync(
    join(dir, "hello", "manifest.json"),
    JSON.stringify({ name: "hello", description: "Hello", entrypoint: "run.sh", parameters: {} }),
  );
  writeFileSync(join(dir, "hello", "run.sh"), "#!/bin/sh\necho hi\n", { mode: 0o755 });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "gated");
}

let base: string;
let daemon: GitDaemon;
let t: TestPluginHost;

beforeAll(async () => {
  base = makeTempRoot("install-jobs");
  mkdirSync(join(base, "repos"));
  daemon = await startGitDaemon(join(base, "repos"));
  t = await startPluginHost({ limits: { syncTimeoutMs: 20_000 } });
});

afterAll(async () => {
  await t?.close();
  await daemon?.stop();
  rmSync(base, { recursive: true, force: true });
  if (t) rmSync(t.root, { recursive: true, force: true });
});

async function startJob(url: string): Promise<{ status: number; body: Json; location: string | null }> {
  const response = await fetch(`${t.url}/install`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${SECRET}`,
      "Content-Type": "application/json",
      Prefer: "wait=5, respond-async",
    },
    body: JSON.stringify({ url }),
  });
  return { status: response.status, body: await response.json(), location: response.headers.get("location") };
}

const job = async (id: string): Promise<Json> => (await t.request("GET", `/jobs/${id}`)).body;

describe("install jobs", () => {
  it("answer at once and report cloning, then init, then done with the blocking install's answer", async () => {
    const name = uniqueName("gated");
    writeGatedRepo(join(base, "repos", "gated"), name);
    const started = await startJob(daemon.url("gated"));
    expect(started.status).toBe(202);
    expect(started.body).toEqual({ jobId: expect.any(String) });
    expect(started.location).toBe(`/jobs/${started.body.jobId}`);
    const id: string = started.body.jobId;

    const first = await job(id);
    expect(["cloning", "init"]).toContain(first.state);
    expect(first).toMatchObject({ id, url: daemon.url("gated"), startedAt: expect.any(String) });
    // The init waits for its gate: the job says so, with no result yet.
    await vi.waitFor(async () => expect((await job(id)).state).toBe("init"), 15_000);
    expect((await job(id)).result).toBeUndefined();

    writeFileSync(join(t.pluginsDir, name, "go"), "");
    await vi.waitFor(async () => expect((await job(id)).state).toBe("done"), 15_000);
    const done = await job(id);
    expect(done.output).toBe("init finished");
    expect(done.finishedAt).toEqual(expect.any(String));
    expect(done.result).toMatchObject({ name, description: "Gated init", init_output: "init finished" });
    expect(done.result.message).toContain(`Plugin "${name}" installed.`);
    expect((await t.request("GET", `/bundles/${name}`)).status).toBe(200);

    // Installing it again fails as the blocking call would: 409, said by the job.
    const again = await startJob(daemon.url("gated"));
    expect(again.status).toBe(202);
    await vi.waitFor(async () => expect((await job(again.body.jobId)).state).toBe("failed"), 15_000);
    expect(await job(again.body.jobId)).toMatchObject({
      state: "failed",
      status: 409,
      error: `Plugin "${name}" is already installed.`,
    });
    await t.request("POST", "/remove", { name });
  });

  it("report a repository that cannot be cloned as failed, leaving nothing behind", async () => {
    const started = await startJob(daemon.url("no-such-repo"));
    expect(started.status).toBe(202);
    await vi.waitFor(async () => expect((await job(started.body.jobId)).state).toBe("failed"), 15_000);
    const failed = await job(started.body.jobId);
    expect(failed.status).toBe(400);
    expect(failed.error).toMatch(/^Failed to clone repository/);
    expect(failed.result).toBeUndefined();
    expect(existsSync(join(t.pluginsDir, "no-such-repo"))).toBe(false);
  });

  it("refuse a URL the blocking install refuses before any job exists", async () => {
    const refused = await startJob("file:///etc");
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatch(/Unsupported repository URL/);
    const noBody = await fetch(`${t.url}/install`, {
      method: "POST",
      headers: { Authorization: `Bearer ${SECRET}`, "Content-Type": "text/plain", Prefer: "respond-async" },
      body: "https://example.com/x.git",
    });
    expect(noBody.status).toBe(415);
  });

  it("answer 404 for a job that does not exist, and need the secret", async () => {
    expect(await t.request("GET", "/jobs/not-a-job")).toEqual({
      status: 404,
      body: { error: "Job not found" },
    });
    expect((await t.request("GET", "/jobs/x", undefined, "wrong-secret")).status).toBe(401);
  });
});
