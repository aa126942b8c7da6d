import { describe, it, expect, beforeEach, afterEach } from "vitest";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { loadTomlConfig, parseTomlConfig, resolveInternalSecret } from "./config-file.js";
import { ConfigError } from "./errors.js";

const schema = z.strictObject({
  name: z.string().min(1),
  port: z.number().int().default(3000),
  server: z.strictObject({ host: z.string(), tags: z.array(z.string()).default([]) }).optional(),
});

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "stavrobot-config-file-"));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("parseTomlConfig", () => {
  it("parses and validates, applying defaults", () => {
    const config = parseTomlConfig('name = "bot"\n[server]\nhost = "0.0.0.0"\n', schema);
    expect(config).toEqual({ name: "bot", port: 3000, server: { host: "0.0.0.0", tags: [] } });
  });

  it("invalid TOML is a ConfigError naming the path, the line and the column", () => {
    const error = configError(() => parseTomlConfig('name = "unterminated\n', schema, "data/x/config.toml"));
    expect(error.message).toBe("Invalid TOML in data/x/config.toml, line 1, column 22: Unterminated string");
  });

  it("says where a mistake further down is, without quoting the lines around it", () => {
    const text = 'name = "bot"\npassword = "hunter2-secret"\nport = \n';
    const error = configError(() => parseTomlConfig(text, schema, "config.toml"));
    expect(error.message).toMatch(/^Invalid TOML in config\.toml, line 3, column 8: Unexpected character/);
    expect(error.message).not.toMatch(/pos \d|row \d|hunter2|\n/);
    const twice = configError(() => parseTomlConfig('name = "a"\nname = "b"\n', schema, "config.toml"));
    expect(twice.message).toMatch(
      /^Invalid TOML in config\.toml, line 2, column \d+: Can.t redefine existing key$/,
    );
  });

  it("a wrong type names the key", () => {
    const error = configError(() => parseTomlConfig('name = "bot"\nport = "80"\n', schema, "my.toml"));
    expect(error.message).toContain("Invalid config in my.toml");
    expect(error.message).toContain('key "port"');
  });

  it("names nested keys with dots and lists every problem", () => {
    const error = configError(() => parseTomlConfig("port = 1.5\n[server]\nhost = 5\n", schema));
    expect(error.message).toContain('key "name"');
    expect(error.message).toContain('key "port"');
    expect(error.message).toContain('key "server.host"');
    expect(error.message).toContain("Invalid config in config:");
  });

  it("reports an unknown key of a strict schema", () => {
    const error = configError(() => parseTomlConfig('name = "bot"\nprot = 1\n', schema));
    expect(error.message).toContain("prot");
  });

  it("returns a deeply frozen result", () => {
    const config = parseTomlConfig('name = "bot"\n[server]\nhost = "h"\ntags = ["a", "b"]\n', schema);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.server)).toBe(true);
    expect(Object.isFrozen(config.server?.tags)).toBe(true);
    expect(() => {
      (config as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => {
      (config.server as { host: string }).host = "changed";
    }).toThrow(TypeError);
    expect(() => (config.server?.tags as string[]).push("c")).toThrow(TypeError);
    expect(config.server).toEqual({ host: "h", tags: ["a", "b"] });
  });
});

describe("loadTomlConfig", () => {
  it("loads a real file", () => {
    const path = join(dir, "config.toml");
    writeFileSync(path, 'name = "from-file"\nport = 8080\n');
    expect(loadTomlConfig(path, schema)).toEqual({ name: "from-file", port: 8080 });
  });

  it("names the file in TOML and validation errors", () => {
    const bad = join(dir, "bad.toml");
    writeFileSync(bad, "this is not = = toml");
    expect(configError(() => loadTomlConfig(bad, schema)).message).toContain(`Invalid TOML in ${bad}`);

    const wrong = join(dir, "wrong.toml");
    writeFileSync(wrong, 'name = "x"\nport = true\n');
    const error = configError(() => loadTomlConfig(wrong, schema));
    expect(error.message).toContain(wrong);
    expect(error.message).toContain('key "port"');
  });

  it("a missing file is a ConfigError naming the path", () => {
    const path = join(dir, "missing.toml");
    const error = configError(() => loadTomlConfig(path, schema));
    expect(error.message).toContain(`Cannot read config file ${path}`);
  });
});

describe("resolveInternalSecret", () => {
  it("the STAVROBOT_INTERNAL_SECRET variable wins over the file (and is trimmed)", () => {
    const file = join(dir, "internal-secret");
    writeFileSync(file, "file-secret-0123456789\n");
    const secret = resolveInternalSecret({
      env: { STAVROBOT_INTERNAL_SECRET: "  env-secret  " },
      file,
      create: true,
    });
    expect(secret).toBe("env-secret");
    expect(readFileSync(file, "utf8")).toBe("file-secret-0123456789\n");
  });

  it("the variable wins without creating a file", () => {
    const file = join(dir, "never", "internal-secret");
    expect(resolveInternalSecret({ env: { STAVROBOT_INTERNAL_SECRET: "abc" }, file, create: true })).toBe(
      "abc",
    );
    expect(existsSync(file)).toBe(false);
  });

  it("a blank variable falls back to the file", () => {
    const file = join(dir, "internal-secret");
    writeFileSync(file, "  file-secret-0123456789  \n");
    expect(resolveInternalSecret({ env: { STAVROBOT_INTERNAL_SECRET: "   " }, file, create: false })).toBe(
      "file-secret-0123456789",
    );
  });

  it("create: true writes a random secret with mode 0600 and returns the same value next time", () => {
    const file = join(dir, "nested", "dir", "internal-secret");
    const first = resolveInternalSecret({ env: {}, file, create: true });
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8").trim()).toBe(first);

    expect(resolveInternalSecret({ env: {}, file, create: true })).toBe(first);
    expect(resolveInternalSecret({ env: {}, file, create: false })).toBe(first);

    const otherFile = join(dir, "other-secret");
    expect(resolveInternalSecret({ env: {}, file: otherFile, create: true })).not.toBe(first);
  });

  it("create: false with no file is a ConfigError naming the file, and creates nothing", () => {
    const file = join(dir, "internal-secret");
    const error = configError(() => resolveInternalSecret({ env: {}, file, create: false }));
    expect(error.message).toContain(file);
    expect(error.message).toContain("STAVROBOT_INTERNAL_SECRET");
    expect(existsSync(file)).toBe(false);
  });

  it("a too-short file is a ConfigError and is left alone", () => {
    const file = join(dir, "internal-secret");
    writeFileSync(file, "short\n");
    const error = configError(() => resolveInternalSecret({ env: {}, file, create: true }));
    expect(error.message).toContain(file);
    expect(error.message).toMatch(/too short/);
    expect(readFileSync(file, "utf8")).toBe("short\n");
  });

  it("accepts a file of exactly 16 characters after trimming", () => {
    const file = join(dir, "internal-secret");
    writeFileSync(file, "0123456789abcdef\n");
    expect(resolveInternalSecret({ env: {}, file, create: false })).toBe("0123456789abcdef");
    writeFileSync(file, " 0123456789abcde \n");
    expect(() => resolveInternalSecret({ env: {}, file, create: false })).toThrow(ConfigError);
  });
});
