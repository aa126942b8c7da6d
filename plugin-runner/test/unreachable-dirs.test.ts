import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "@stavrobot/common";
import { isRoot, makeTempRoot, startPluginHost } from "./helpers.js";

describe.runIf(isRoot)(
  "plain sandbox: plugin directories behind a private parent (a checkout under /root)",
  () => {
    const root = makeTempRoot("plugin-runner-private");
    afterAll(() => rmSync(root, { recursive: true, force: true }));

    it("says at start-up that plugin tools will fail, why, and how to fix it", async () => {
      const hidden = join(root, "private-home");
      mkdirSync(hidden);
      chmodSync(hidden, 0o700);
      const lines: string[] = [];
      const t = await startPluginHost({
        root: hidden,
        logger: createLogger("test", "info", (line) => lines.push(line)),
        isolation: true,
        plainSandbox: true,
      });
      await t.close();
      const errors = lines.filter(
        (line) => line.includes(" ERROR ") && line.includes("plugin users cannot reach"),
      );
      expect(errors.length).toBeGreaterThan(0);
      expect(errors[0]).toContain(`${hidden} is not searchable by other users`);
      expect(errors[0]).toContain(`chmod o+x ${hidden}`);
    });

    it("leaves the runtime directories plugin users cannot use off the tools' PATH, saying so at start-up", async () => {
      const home = join(root, "root-home");
      const bin = join(home, ".local", "bin");
      mkdirSync(bin, { recursive: true });
      chmodSync(home, 0o700);
      const lines: string[] = [];
      const t = await startPluginHost({
        root: join(root, "open-data"),
        logger: createLogger("test", "info", (line) => lines.push(line)),
        isolation: true,
        plainSandbox: true,
        toolPath: `${bin}:/usr/bin:/bin`,
      });
      await t.close();
      const warnings = lines.filter((line) => line.includes("plugin tools cannot use the programs in"));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(` WARN `);
      expect(warnings[0]).toContain(`${bin} (other users cannot pass through to them)`);
      expect(warnings[0]).toContain("their PATH leaves them out");
      expect(warnings[0]).toContain("chmod o+x");
    });
  },
);
