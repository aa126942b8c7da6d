import { defaultServerConditions, type Plugin } from "vite";
import { defineConfig } from "vitest/config";

// One command runs every workspace's tests. Workspaces import each other's TypeScript
// sources through the "source" export condition, so no build step is needed first.
const conditions = ["source", ...defaultServerConditions];

// The SDK ships source maps naming sources it does not ship: transforming it (below) would warn
// about each of its files in every test file that loads it.
const quietSdkSourcemaps: Plugin = {
  name: "quiet-mcp-sdk-sourcemaps",
  configResolved(config) {
    const warnOnce = config.logger.warnOnce.bind(config.logger);
    config.logger.warnOnce = (message, options) => {
      if (message.includes("Sourcemap for") && message.includes("@modelcontextprotocol/sdk")) return;
      warnOnce(message, options);
    };
  },
};

export default defineConfig({
  plugins: [quietSdkSourcemaps],
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    // The MCP SDK imports packages that publish TypeScript under a "source" condition too: Vite
    // transforms them instead of handing Node a .ts file.
    server: { deps: { inline: ["@modelcontextprotocol/sdk", "eventsource", "eventsource-parser"] } },
    projects: [
      "common",
      "app",
      "plugin-runner",
      "python-runner",
      "coder",
      "signal-bridge",
      "whatsapp-bridge",
    ].map((name) => ({
      extends: true,
      test: {
        name,
        root: `./${name}`,
        include: ["src/**/*.test.ts", "test/**/*.test.ts"],
        testTimeout: 60_000,
        hookTimeout: 120_000,
      },
    })),
  },
});
