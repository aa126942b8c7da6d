import { lstatSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestPluginHost } from "./helpers.js";
import { sandboxModes, isRoot, startPluginHost, uniqueName, userExists, writePlugin } from "./helpers.js";
import { pluginUserName } from "../src/users.js";

/** Reads another plugin's files from inside a tool; prints what it managed to read. */
const SNOOP = `#!/bin/sh
cat >/dev/null
target="$PLUGINS/$VICTIM"
printf 'whoami=%s\\n' "$(id -un)"
printf 'config=%s\\n' "$(cat "$target/config.json" 2>&1)"
printf 'secret=%s\\n' "$(cat "$target/stash/secret.txt" 2>&1)"
printf 'list=%s\\n' "$(ls "$target" 2>&1)"
printf 'plugins=%s\\n' "$(ls "$PLUGINS" 2>&1)"
printf 'own=%s\\n' "$(cat ../config.json 2>&1)"
`;

describe.runIf(isRoot).each(sandboxModes())("isolation (root, %s sandbox)", (mode, plainSandbox) => {
  let t: TestPluginHost;
  const a = uniqueName("iso-a");
  const b = uniqueName("iso-b");
  const c = uniqueName("iso-c");

  beforeAll(async () => {
    t = await startPluginHost({ plainSandbox });
    writePlugin(t.pluginsDir, a, [
      { name: "snoop", script: SNOOP.replaceAll("$PLUGINS", t.pluginsDir).replaceAll("$VICTIM", b) },
      { name: "env", script: "#!/bin/sh\ncat >/dev/null\ntr '\\0' '\\n' < /proc/$$/environ\n" },
    ]);
    const victim = writePlugin(t.pluginsDir, b, [{ name: "noop", script: "#!/bin/sh\necho '{}'\n" }], {
      config: { token: { description: "Token", required: true } },
    });
    writeFileSync(join(victim, "config.json"), JSON.stringify({ token: "b-secret-token" }));
    writePlugin(t.pluginsDir, b, [{ name: "stash", script: "#!/bin/sh\n" }]);
    writeFileSync(join(victim, "stash", "secret.txt"), "b-private-file");
    writePlugin(t.pluginsDir, c, [{ name: "noop", script: "#!/bin/sh\necho '{}'\n" }], {
      config: { key: { description: "Key", required: true } },
    });
    // Plugin B's first run hands its directory to its own user.
    expect((await t.request("POST", `/bundles/${b}/tools/noop/run`, {})).status).toBe(200);
    writeFileSync(join(t.pluginsDir, a, "config.json"), JSON.stringify({ mine: "a-value" }));
  });

  afterAll(async () => {
    await t.close();
    for (const name of [a, b, c])
      if (userExists(pluginUserName(name))) await t.host.isolation.removeUser(name);
    rmSync(t.root, { recursive: true, force: true });
  });

  it("runs each plugin as its own user and keeps bundles private", async () => {
    const { status, body } = await t.request("POST", `/bundles/${a}/tools/snoop/run`, {});
    expect(status).toBe(200);
    const output = String(body.output);
    expect(output).toContain(`whoami=${pluginUserName(a)}`);
    // With namespaces the other plugins' files do not even exist for the tool.
    const refused = mode === "namespaces" ? /No such file or directory/ : /Permission denied/;
    for (const key of ["config", "secret", "list", "plugins"]) {
      expect(output).toMatch(new RegExp(`${key}=.*${refused.source}`));
    }
    expect(output).toContain('own={"mine":"a-value"}');
    expect(output).not.toContain("b-secret-token");
    expect(output).not.toContain("b-private-file");

    const bundle = statSync(join(t.pluginsDir, b));
    expect(bundle.mode & 0o777).toBe(0o700);
    expect(statSync(t.pluginsDir).mode & 0o777).toBe(0o711);
  });

  it("gives tools only the allowed environment, never the runner's secrets", async () => {
    process.env.STAVROBOT_TEST_SECRET = "host-secret-value";
    try {
      const { body } = await t.request("POST", `/bundles/${a}/tools/env/run`, {});
      const lines = String(body.output).trim().split("\n");
      const keys = lines.map((line) => line.slice(0, line.indexOf("=")));
      const allowed = [
        // bubblewrap sets the working directory's PWD; it tells nothing the tool does not know.
        "PWD",
        "PATH",
        "HOME",
        "UV_CACHE_DIR",
        "UV_PYTHON_INSTALL_DIR",
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
      ];
      for (const key of keys) expect(allowed).toContain(key);
      expect(keys).toEqual(expect.arrayContaining(["PATH", "HOME", "UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR"]));
      expect(String(body.output)).not.toContain("host-secret-value");
      expect(String(body.output)).not.toContain("test-internal-secret");
      const home = lines.find((line) => line.startsWith("HOME="))?.slice(5) ?? "";
      expect(home).toBe(mode === "namespaces" ? `/cache/${a}/home` : join(t.cacheDir, a, "home"));
      const info = statSync(join(t.cacheDir, a, "home"));
      expect(info.mode & 0o777).toBe(0o700);
      expect(info.uid).toBe(statSync(join(t.pluginsDir, a)).uid);
      expect(info.uid).not.toBe(0);
    } finally {
      delete process.env.STAVROBOT_TEST_SECRET;
    }
  });

  it("does not let a planted config.json symlink redirect a config write", async () => {
    const outside = join(t.root, "outside.txt");
    writeFileSync(outside, "original outside content");
    const link = join(t.pluginsDir, c, "config.json");
    symlinkSync(outside, link);
    expect(readlinkSync(link)).toBe(outside);

    const shown = await t.request("GET", `/bundles/${c}`);
    expect(shown.body.config.key.configured).toBe(false);
    const { status } = await t.request("POST", "/configure", { name: c, config: { key: "new-value" } });
    expect(status).toBe(200);
    expect(readFileSync(outside, "utf8")).toBe("original outside content");
    expect(lstatSync(link).isSymbolicLink()).toBe(false);
    expect(JSON.parse(readFileSync(link, "utf8"))).toEqual({ key: "new-value", permissions: ["*"] });
    expect(lstatSync(link).uid).toBe(statSync(join(t.pluginsDir, c)).uid);
  });
});
