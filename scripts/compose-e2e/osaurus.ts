import { readFileSync } from "node:fs";
import { join } from "node:path";
import { buildEchoLibrary, skillText, zipFiles } from "../../plugin-runner/test/osaurus-fixtures.js";
import { type Stack, eventually, toolTurn } from "./stack.js";

const ID = "test.compose";
const NAME = "test-compose";

async function runTool(stack: Stack, marker: string, tool: string, parameters: object): Promise<string> {
  await stack.plan(`[[${marker}]]`, [
    toolTurn("run_plugin_tool", { plugin: NAME, tool, parameters: JSON.stringify(parameters) }),
  ]);
  return (await stack.chat({ message: `[[${marker}]] run ${tool}` })).response;
}

/**
 * An Osaurus plugin in the compose stack: the test plugin's C source built with gcc here, zipped
 * as `<plugin_id>-<version>.zip` and served by the fake services' file server; the model installs
 * it by URL, its tool runs in its host process in the runner's sandbox, and after a crash (abort)
 * the host is started again while the runner keeps answering.
 */
export async function checkOsaurusPlugin(stack: Stack): Promise<string> {
  const e2e = join(stack.options.dir, "e2e");
  const library = buildEchoLibrary(join(e2e, "build", "libcompose.so"), { pluginId: ID });
  zipFiles(join(e2e, "files"), `${ID}-1.0.0.zip`, {
    "libcompose.so": readFileSync(library),
    "docs/SKILL.md": skillText("compose-echo", "How to use the echo tool in compose."),
  });
  await stack.plan("[[m-osaurus-install]]", [
    toolTurn("manage_plugins", { action: "install", url: `http://fake-services:8082/${ID}-1.0.0.zip` }),
  ]);
  const installed = (await stack.chat({ message: "[[m-osaurus-install]] install the Osaurus plugin" }))
    .response;
  if (!installed.includes(`Plugin "${NAME}" installed.`) || !installed.includes("Its format is Osaurus."))
    throw new Error(`installing ${NAME}: ${installed}`);

  const echoed = await runTool(stack, "m-osaurus-echo", "echo", { text: "from compose" });
  if (!echoed.includes("from compose") || !echoed.includes(`"working_directory"`))
    throw new Error(`the echo tool answered: ${echoed}`);
  const crashed = await runTool(stack, "m-osaurus-crash", "crash", {});
  if (!/crashed/.test(crashed)) throw new Error(`the crash tool answered: ${crashed}`);
  const again = await eventually("the echo tool answering after the crash", 30_000, async () => {
    const answer = await runTool(stack, `m-osaurus-again-${Date.now()}`, "echo", { text: "back again" });
    if (!answer.includes("back again")) throw new Error(`it answered: ${answer}`);
    return answer;
  });
  return `installed, echoed, crashed and answered again: ${again.slice(0, 160)}`;
}
