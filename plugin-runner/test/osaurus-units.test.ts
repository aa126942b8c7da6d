import { describe, expect, it } from "vitest";
import { zipSync } from "fflate";
import { parseZipName, unpackZip } from "../src/osaurus/package.js";
import { readSkill } from "../src/skills.js";
import { osaurusName, parseOsaurusManifest, policyOf } from "../src/formats/osaurus-manifest.js";

describe("Osaurus package names", () => {
  it.each([
    ["com.acme.echo-1.0.0.zip", "com.acme.echo", "1.0.0"],
    ["dev.example.MyPlugin-0.1.0.zip", "dev.example.MyPlugin", "0.1.0"],
    ["my-plugin-2.3.1-beta.zip", "my-plugin", "2.3.1-beta"],
    ["osaurus.time-2.0.1-macos-arm64.zip", "osaurus.time", "2.0.1-macos-arm64"],
    ["a-1.0.0-2.0.0.zip", "a-1.0.0", "2.0.0"],
  ])("%s is %s at %s (read from the right)", (file, pluginId, version) => {
    expect(parseZipName(file)).toEqual({ pluginId, version });
  });

  it.each(["echo.zip", "echo-1.0.zip", "echo-01.0.0.zip", "echo-1.0.0.tar.gz", "-1.0.0.zip"])(
    "refuses %s",
    (file) => {
      expect(() => parseZipName(file)).toThrow(/not an Osaurus package name/);
    },
  );

  it("names plugins as we do: lower case, dots become hyphens", () => {
    expect(osaurusName("dev.Example.My_Plugin")).toBe("dev-example-my-plugin");
  });
});

describe("Osaurus packages", () => {
  const elf = (machine: number): Uint8Array => {
    const data = Buffer.alloc(64);
    data.writeUInt32BE(0x7f454c46, 0);
    data[4] = 2;
    data[5] = 1;
    data.writeUInt16LE(3, 16);
    data.writeUInt16LE(machine, 18);
    return data;
  };
  const here = process.arch === "arm64" ? 0xb7 : 0x3e;
  const elsewhere = process.arch === "arm64" ? 0x3e : 0xb7;

  it("refuses paths that leave the package", async () => {
    const zip = zipSync({ "../evil.so": elf(here) });
    await expect(unpackZip(zip)).rejects.toThrow(/unsafe path/);
  });

  it("refuses a library for another architecture, saying which", async () => {
    const zip = zipSync({ "libx.so": elf(elsewhere) });
    await expect(unpackZip(zip)).rejects.toThrow(/is a Linux library for .*, but this machine is/);
  });

  it("keeps the runner's own files out of the package and leaves out __MACOSX", async () => {
    const unpacked = await unpackZip(
      zipSync({
        "p/libx.so": elf(here),
        "p/config.json": Buffer.from("{}"),
        "__MACOSX/p/._libx.so": Buffer.from("x"),
      }),
    );
    // The wrapper folder p/ is read from inside.
    expect(unpacked.library).toBe("libx.so");
    expect([...unpacked.files.keys()]).toEqual(["libx.so"]);
    expect(unpacked.warnings.join(" ")).toContain("config.json was left out");
  });
});

describe("skills (Agent Skills frontmatter)", () => {
  const skill = (front: string) => `---\n${front}\n---\nBody.\n`;
  it("reads a valid skill", async () => {
    expect(await readSkill(skill('name: pdf-tools\ndescription: "Read PDFs: all of them."'))).toMatchObject({
      ok: true,
      skill: { name: "pdf-tools", description: "Read PDFs: all of them." },
    });
  });
  it.each([
    ["name: PDF\ndescription: x", /its name must be/],
    ["name: -pdf\ndescription: x", /its name must be/],
    ["name: pdf--tools\ndescription: x", /its name must be/],
    ["name: pdf\ndescription: ''", /description must be 1–1024/],
    [`name: pdf\ndescription: ${"x".repeat(1025)}`, /description must be 1–1024/],
    ["name: pdf\ndescription: x\nmetadata: [1]", /metadata must be a map/],
    ["name: pdf\ndescription: x\nauthor: me", /unknown frontmatter field\(s\): author/],
    ["name: pdf\ndescription: a: b", /not valid YAML/],
  ])("refuses %s", async (front, error) => {
    const read = await readSkill(skill(front));
    expect(read.ok).toBe(false);
    expect(read.ok ? "" : read.error).toMatch(error);
  });
});

describe("Osaurus manifests", () => {
  it("takes auto and deny as written, and anything else as ask", () => {
    expect(["auto", "deny", "ask", "allow", undefined, 3].map(policyOf)).toEqual([
      "auto",
      "deny",
      "ask",
      "ask",
      "ask",
      "ask",
    ]);
  });
  it("refuses a manifest without plugin_id or capabilities", () => {
    expect(() => parseOsaurusManifest("{}")).toThrow(/no plugin_id/);
    expect(() => parseOsaurusManifest('{"plugin_id":"a.b"}')).toThrow(/no capabilities/);
    expect(() => parseOsaurusManifest("nope")).toThrow(/not valid JSON/);
  });
});
