import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

// One command runs every workspace's tests. Workspaces import each other's TypeScript
// sources through the "source" export condition, so no build step is needed first.
const conditions = ["source", ...defaultServerConditions];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    // The MCP SDK imports packages that publish TypeScript under a "source" condition too: Vite
    // transforms them instead of handing Node a .ts file.
    server: { deps: { inline: ["@modelcontextprotocol/sdk", "eventsource", "eventsource-parser"] } },
    projects: ["common", "app", "plugin-runner", "python-runner", "coder", "signal-bridge"].map((name) => ({
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
