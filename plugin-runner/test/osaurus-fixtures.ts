import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The test plugin's C source (the Osaurus C ABI, v1 and v2 entries). */
export const ECHO_SOURCE = fileURLToPath(new URL("./fixtures/osaurus-echo.c", import.meta.url));

/** Builds the test plugin with gcc into `out` (a `.so`); `v1Only` leaves out the v2 entry point. */
export function buildEchoLibrary(out: string, options: { pluginId?: string; v1Only?: boolean } = {}): string {
  mkdirSync(dirname(out), { recursive: true });
  const defines = [
    ...(options.pluginId ? [`-DPLUGIN_ID="${options.pluginId}"`] : []),
    ...(options.v1Only ? ["-DV1_ONLY"] : []),
  ];
  execFileSync("gcc", ["-shared", "-fPIC", "-O1", "-w", ...defines, "-o", out, ECHO_SOURCE]);
  return out;
}

/** A SKILL.md with Agent Skills frontmatter. */
export function skillText(name: string, description: string, body = "Use the echo tool first."): string {
  return `---\nname: ${name}\ndescription: ${JSON.stringify(description)}\nmetadata:\n  author: tests\n  version: "1.0.0"\n---\n\n# ${name}\n\n${body}\n`;
}

/**
 * Zips `files` (path → content) with the `zip` program into `<dir>/<fileName>`; paths may hold
 * folders (a wrapper folder, a skill in a subfolder).
 */
export function zipFiles(dir: string, fileName: string, files: Record<string, string | Buffer>): string {
  const staging = join(dir, `.staging-${fileName}`);
  rmSync(staging, { recursive: true, force: true });
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(staging, path)), { recursive: true });
    writeFileSync(join(staging, path), content);
  }
  const out = join(dir, fileName);
  rmSync(out, { force: true });
  execFileSync("zip", ["-q", "-r", out, "."], { cwd: staging });
  rmSync(staging, { recursive: true, force: true });
  return out;
}

/** A minisign key pair made here: the public key's base64 line, and a signer writing `.minisig` text. */
export function minisignKeys(): { publicKey: string; sign(data: Buffer, prehashed?: boolean): string } {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x as string, "base64url");
  const keyId = createHash("sha256").update(raw).digest().subarray(0, 8);
  return {
    publicKey: Buffer.concat([Buffer.from("Ed"), keyId, raw]).toString("base64"),
    sign(data, prehashed = false) {
      const message = prehashed ? createHash("blake2b512").update(data).digest() : data;
      const signature = sign(null, message, privateKey);
      const trusted = `timestamp:${Math.floor(Date.now() / 1000)}\tfile:test.zip`;
      const global = sign(null, Buffer.concat([signature, Buffer.from(trusted)]), privateKey);
      return [
        "untrusted comment: signature from a test key",
        Buffer.concat([Buffer.from(prehashed ? "ED" : "Ed"), keyId, signature]).toString("base64"),
        `trusted comment: ${trusted}`,
        global.toString("base64"),
        "",
      ].join("\n");
    },
  };
}
