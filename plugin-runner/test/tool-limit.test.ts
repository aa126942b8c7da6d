import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestPluginHost } from "./helpers.js";
import { startPluginHost, uniqueName, writePlugin } from "./helpers.js";

const TOOLS = 260;
const LIMIT = 256;

describe("a plugin with more tools than the limit", () => {
  let t: TestPluginHost;
  const name = uniqueName("many");
  const toolName = (i: number) => `t${String(i).padStart(3, "0")}`;

  beforeAll(async () => {
    // Listing needs no plugin user: nothing here runs.
    t = await startPluginHost({ isolation: false });
    writePlugin(
      t.pluginsDir,
      name,
      Array.from({ length: TOOLS }, (_, i) => ({ name: toolName(i), script: "#!/bin/sh\necho ok\n" })),
    );
  });

  afterAll(async () => {
    await t?.close();
    if (t) rmSync(t.root, { recursive: true, force: true });
  });

  it(`shows the first ${LIMIT} tools only`, async () => {
    const { status, body } = await t.request("GET", `/bundles/${name}`);
    expect(status).toBe(200);
    const names = (body.tools as { name: string }[]).map((tool) => tool.name);
    expect(names).toHaveLength(LIMIT);
    expect(names[0]).toBe(toolName(0));
    expect(names.at(-1)).toBe(toolName(LIMIT - 1));
  });

  it("does not run a tool beyond the limit, and names a capped list of the others", async () => {
    const { status, body } = await t.request("POST", `/bundles/${name}/tools/${toolName(LIMIT)}/run`, {});
    expect(status).toBe(404);
    expect(body.error).toMatch(/^Tool not found\. Available tools: t000, t001, /);
    expect(body.error).toContain(`and ${LIMIT - 20} more`);
  });
});
