import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { git } from "../../../../plugin-runner/test/helpers.js";

/**
 * A Stavrobot plugin's git repository as its author keeps it: a config with a required secret and
 * a default, instructions with markup in them, a sync and an async tool, and an init script that
 * waits until a file named `go` appears in the installed plugin's directory.
 */
export function writePluginRepo(dir: string, name: string): void {
  const tool = (tool: string, description: string, script: string, extra: Record<string, unknown> = {}) => {
    mkdirSync(join(dir, tool), { recursive: true });
    writeFileSync(
      join(dir, tool, "manifest.json"),
      JSON.stringify({ name: tool, description, entrypoint: "run.sh", parameters: {}, ...extra }),
    );
    writeFileSync(join(dir, tool, "run.sh"), script, { mode: 0o755 });
  };
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "manifest.json"),
    JSON.stringify({
      name,
      description: "Weather forecasts.",
      instructions: "Get an API key at https://weather.example.com <b>and</b> paste it below.",
      init: { entrypoint: "init.sh" },
      config: {
        api_key: { description: "Weather API key", required: true },
        units: { description: "metric or imperial", required: false, default: "metric" },
      },
    }),
  );
  writeFileSync(
    join(dir, "init.sh"),
    "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.05; done\necho 'weather data downloaded'\n",
    { mode: 0o755 },
  );
  tool("forecast", "Forecast for a city.", '#!/bin/sh\necho \'{"forecast": "sunny"}\'\n');
  tool("radar", "Slow radar scan.", "#!/bin/sh\necho rain\n", { async: true });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "weather");
}
