import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServiceClient } from "@stavrobot/common";
import { createRunPluginTool } from "../src/tools/run-plugin-tool.js";
// The real plugin-runner, started in this process through its own test helpers, and its bench's timers.
import { SECRET, startPluginHost, uniqueName, writePlugin } from "../../plugin-runner/test/helpers.js";
import { median, spawnDirect, timeEach } from "../../plugin-runner/bench/bench.js";

const RUNS = 200;
const SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n";

/**
 * The figure: what the agent's `run_plugin_tool` (bundle lookup + run over HTTP +
 * formatting) adds to spawning the same entrypoint directly.
 */
export async function benchRunPluginTool(): Promise<Record<string, string>> {
  const pluginHost = await startPluginHost();
  const filesDir = await mkdtemp(join(tmpdir(), "bench-files-"));
  const plugin = uniqueName("bench");
  const dir = writePlugin(pluginHost.pluginsDir, plugin, [{ name: "noop", script: SCRIPT }]);
  try {
    const client = createServiceClient({ baseUrl: pluginHost.url, bearer: SECRET, retries: 0 });
    const tool = createRunPluginTool({ pluginRunner: client, filesDir });
    const run = () => tool.execute("bench", { plugin, tool: "noop", parameters: "{}" });
    for (let i = 0; i < 5; i++) await run();
    const direct = median(
      await timeEach(RUNS, () => spawnDirect(join(dir, "noop", "run.sh"), join(dir, "noop"))),
    );
    const viaTool = median(await timeEach(RUNS, run));
    return {
      "run_plugin_tool end to end (median of 200)": `${viaTool.toFixed(1)} ms`,
      "run_plugin_tool overhead over a direct spawn (median)": `${(viaTool - direct).toFixed(1)} ms`,
    };
  } finally {
    await pluginHost.request("POST", "/remove", { name: plugin });
    await pluginHost.close();
    await rm(filesDir, { recursive: true, force: true });
    await rm(pluginHost.root, { recursive: true, force: true });
  }
}
