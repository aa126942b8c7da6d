import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestPluginHost } from "./helpers.js";
import { makeTempRoot, startPluginHost, uniqueName } from "./helpers.js";
import { serveDirectory } from "@stavrobot/common/test-support";
import { buildEchoLibrary, minisignKeys, zipFiles } from "./osaurus-fixtures.js";

/**
 * Osaurus packages with a trusted minisign key configured: a package signed with it (plain `Ed`
 * or prehashed `ED`) is verified and the reply says so; a bad signature, or one by another key, is
 * refused and nothing is installed; a package without a signature installs, unverified.
 */
describe("Osaurus package signatures", () => {
  let t: TestPluginHost;
  let files: string;
  let server: { url: string; close(): Promise<void> };
  const suffix = uniqueName("sig").slice(4);
  const id = (tag: string) => `test.${tag}${suffix}`;
  const name = (tag: string) => `test-${tag}${suffix}`;
  const trusted = minisignKeys();
  const stranger = minisignKeys();

  beforeAll(async () => {
    files = makeTempRoot("osaurus-signed");
    const pack = (tag: string, sign?: (data: Buffer) => string): void => {
      const lib = buildEchoLibrary(join(files, "build", `lib${tag}.so`), { pluginId: id(tag), v1Only: true });
      const zip = zipFiles(files, `${id(tag)}-1.0.0.zip`, { "libecho.so": readFileSync(lib) });
      if (sign) writeFileSync(`${zip}.minisig`, sign(readFileSync(zip)));
    };
    pack("good", (data) => trusted.sign(data));
    pack("hashed", (data) => trusted.sign(data, true));
    pack("tampered", (data) => trusted.sign(Buffer.concat([data, Buffer.from("x")])));
    pack("foreign", (data) => stranger.sign(data));
    pack("unsigned");
    server = await serveDirectory(files);
    t = await startPluginHost({ osaurusTrustedKeys: [trusted.publicKey] });
  }, 120_000);

  afterAll(async () => {
    for (const tag of ["good", "hashed", "unsigned"])
      await t?.request("POST", "/remove", { name: name(tag) });
    await t?.close();
    await server?.close();
    if (files) rmSync(files, { recursive: true, force: true });
    if (t) rmSync(t.root, { recursive: true, force: true });
  });

  const install = (tag: string) =>
    t.request("POST", "/install", { url: `${server.url}/${id(tag)}-1.0.0.zip` });

  it.each(["good", "hashed"])(
    "verifies a package signed with the trusted key (%s) and says so",
    async (tag) => {
      const installed = await install(tag);
      expect(installed.status).toBe(200);
      expect(installed.body.message).toContain(
        "The package's minisign signature was verified against a trusted key.",
      );
      const listed = await t.request("GET", "/bundles");
      expect(listed.body.plugins.find((plugin: { name: string }) => plugin.name === name(tag)).verified).toBe(
        true,
      );
    },
  );

  it("refuses a package whose signature does not match, or that another key signed; nothing is left", async () => {
    const tampered = await install("tampered");
    expect(tampered.status).toBe(400);
    expect(tampered.body.error).toMatch(
      /signature is not valid, so it was not installed: the signature does not match the file/,
    );
    const foreign = await install("foreign");
    expect(foreign.status).toBe(400);
    expect(foreign.body.error).toMatch(/signed with key [0-9A-F]{16}, which is not a trusted key/);
    for (const tag of ["tampered", "foreign"]) {
      expect((await t.request("GET", `/bundles/${name(tag)}`)).status).toBe(404);
    }
  });

  it("installs a package without a signature, unverified, and says so", async () => {
    const installed = await install("unsigned");
    expect(installed.status).toBe(200);
    expect(installed.body.message).toContain(
      "The package was not verified: it came without a .minisig signature.",
    );
  });

  it("verifies what the real minisign signs", async (context) => {
    let minisign = true;
    try {
      execFileSync("minisign", ["-v"], { stdio: "ignore" });
    } catch {
      minisign = false;
    }
    if (!minisign) {
      console.warn("skipped: the minisign program is not installed (apt-get install minisign)");
      context.skip();
    }
    const { parseMinisignKey, verifyMinisign } = await import("../src/osaurus/minisign.js");
    const dir = makeTempRoot("minisign");
    execFileSync("minisign", ["-G", "-W", "-p", join(dir, "key.pub"), "-s", join(dir, "key.sec")]);
    writeFileSync(join(dir, "data.zip"), "some package bytes");
    const key = parseMinisignKey(readFileSync(join(dir, "key.pub"), "utf8"));
    for (const legacy of [true, false]) {
      execFileSync("minisign", [
        "-S",
        ...(legacy ? ["-l"] : []),
        "-s",
        join(dir, "key.sec"),
        "-m",
        join(dir, "data.zip"),
      ]);
      const signature = readFileSync(join(dir, "data.zip.minisig"), "utf8");
      expect(verifyMinisign(Buffer.from("some package bytes"), signature, [key])).toContain("file:data.zip");
      expect(() => verifyMinisign(Buffer.from("other bytes"), signature, [key])).toThrow(/does not match/);
    }
    rmSync(dir, { recursive: true, force: true });
  });
});
