import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SYSTEM_TOOL_PATH } from "@stavrobot/common";
import { namespacesHere, spawnServiceProcess, startServiceProcess } from "@stavrobot/common/test-support";
import { isRoot, makeTempRoot } from "./helpers.js";

const SECRET = "main-test-secret-0123456789";
const ENTRY = "python-runner/src/main.ts";

describe("main.ts as a real process", () => {
  const root = makeTempRoot("python-runner-main");
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const env = {
    STAVROBOT_INTERNAL_SECRET: SECRET,
    PYTHON_RUNNER_STATE_DIR: join(root, "state"),
    PYTHON_RUNNER_TOOL_PATH: SYSTEM_TOOL_PATH,
  };

  it("serves POST /run behind the Bearer secret, reports its sandbox and stops on SIGTERM", async () => {
    const service = await startServiceProcess({
      entry: ENTRY,
      env: { ...env, PYTHON_RUNNER_TIMEOUT_MS: "1000" },
    });
    try {
      const health = await (await fetch(`${service.url}/health`)).json();
      expect(health).toMatchObject({
        status: "ok",
        sandbox: { mode: namespacesHere() ? "namespaces" : "plain", users: isRoot },
        uv: false,
      });
      const body = JSON.stringify({ code: "import os\nprint(os.getuid() != 0)\nwhile True: pass" });
      const refused = await fetch(`${service.url}/run`, { method: "POST", body });
      expect(refused.status).toBe(401);
      const answer = await fetch(`${service.url}/run`, {
        method: "POST",
        headers: { Authorization: `Bearer ${SECRET}`, "Content-Type": "application/json" },
        body,
      });
      expect(answer.status).toBe(200);
      expect(await answer.json()).toEqual({
        output: `${isRoot ? "True" : "False"}\n\nProcess timed out after 1 second.`,
        files: [],
      });
    } finally {
      service.child.kill("SIGTERM");
    }
    expect(await service.exited).toBe(0);
    expect(service.log()).toContain("python-runner listening");
  });

  it("reports the plain sandbox when told to use it", async () => {
    const service = await startServiceProcess({
      entry: ENTRY,
      env: { ...env, PYTHON_RUNNER_SANDBOX: "plain" },
    });
    try {
      const health = await (await fetch(`${service.url}/health`)).json();
      expect(health).toMatchObject({ sandbox: { mode: "plain", reason: "disabled by configuration" } });
      expect(service.log()).toContain("network removal is not enforced");
    } finally {
      service.child.kill("SIGTERM");
    }
    expect(await service.exited).toBe(0);
  });

  it("exits 78 naming a wrong variable", async () => {
    const service = await spawnServiceProcess({
      entry: ENTRY,
      port: 0,
      env: { STAVROBOT_INTERNAL_SECRET: SECRET, PYTHON_RUNNER_SANDBOX: "none" },
    });
    expect(await service.exited).toBe(78);
    expect(service.log()).toContain("PYTHON_RUNNER_SANDBOX");
  });
});
