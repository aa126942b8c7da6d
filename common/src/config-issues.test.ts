import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigError } from "./errors.js";
import { parseTomlConfig } from "./config-file.js";
import { closest, editDistance } from "./config-issues.js";

const schema = z.strictObject({
  name: z.string().min(1),
  port: z.number().int().positive().default(3000),
  level: z.enum(["debug", "info", "warn"]).default("info"),
  site: z.url().optional(),
  token: z.string().min(8, "must be at least 8 characters").optional(),
  server: z.strictObject({ host: z.string(), timeoutSeconds: z.number().max(60).optional() }),
  servers: z.record(z.string(), z.strictObject({ command: z.string() })).optional(),
});

function problem(text: string): string {
  try {
    parseTomlConfig(text, schema, "config.toml");
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    // No validator jargon reaches a person.
    expect(message).not.toMatch(/ZodError|invalid_type|unrecognized_keys|received undefined|Invalid input/);
    return message;
  }
  throw new Error("expected the config to be refused");
}

describe("config problems in a person's words", () => {
  it("a missing key says what to add", () => {
    expect(problem('[server]\nhost = "h"\n')).toBe(
      'Invalid config in config.toml: key "name" is missing: add name = "…"',
    );
  });

  it("a misspelt key is named with the key it most likely meant", () => {
    expect(problem('name = "a"\nnmae = "b"\n[server]\nhost = "h"\n')).toContain(
      'key "nmae" is not a setting: did you mean "name"?',
    );
    expect(problem('name = "a"\n[server]\nhots = "h"\n')).toContain(
      'key "server.hots" is not a setting in [server]: did you mean "host"?',
    );
    // A shortened key, and a key inside a table of tables.
    expect(problem('name = "a"\n[server]\nhost = "h"\ntimeout = 5\n')).toContain(
      'did you mean "timeoutSeconds"?',
    );
    expect(problem('name = "a"\n[server]\nhost = "h"\n[servers.x]\ncommnd = "c"\n')).toContain(
      'key "servers.x.commnd" is not a setting in [servers.x]: did you mean "command"?',
    );
  });

  it("a key far from every setting lists the settings instead of guessing", () => {
    expect(problem('name = "a"\ncolour = "red"\n[server]\nhost = "h"\n')).toContain(
      'key "colour" is not a setting; the settings here are "name", "port", "level"',
    );
  });

  it("a wrong type says what to write, naming the kind of value found but never the value", () => {
    const message = problem('name = "a"\nport = "hunter2-secret"\n[server]\nhost = "h"\n');
    expect(message).toContain('key "port" must be a number, e.g. port = 30 (it is text)');
    expect(message).not.toContain("hunter2");
    expect(problem('name = "a"\nport = 1.5\n[server]\nhost = "h"\n')).toContain(
      'key "port" must be a whole number, e.g. port = 30 (it is a number with a fraction)',
    );
    expect(problem('name = "a"\nserver = "h"\n')).toContain('key "server" must be a table');
  });

  it("a choice from a list names the choices and the nearest one", () => {
    expect(problem('name = "a"\nlevel = "wran"\n[server]\nhost = "h"\n')).toContain(
      'key "level" must be one of "debug", "info", "warn" (it is "wran"); did you mean "warn"?',
    );
  });

  it("bounds, formats and the schema's own words", () => {
    expect(problem('name = ""\n[server]\nhost = "h"\n')).toContain('key "name" must not be empty');
    expect(problem('name = "a"\nport = 0\n[server]\nhost = "h"\n')).toContain(
      'key "port" must be more than 0',
    );
    expect(problem('name = "a"\n[server]\nhost = "h"\ntimeoutSeconds = 61\n')).toContain(
      'key "server.timeoutSeconds" must be 60 or less',
    );
    expect(problem('name = "a"\nsite = "nope"\n[server]\nhost = "h"\n')).toContain(
      'key "site" must be a web address, e.g. "https://example.com"',
    );
    expect(problem('name = "a"\ntoken = "short"\n[server]\nhost = "h"\n')).toContain(
      'key "token" must be at least 8 characters',
    );
  });
});

describe("edit distance", () => {
  it("counts insertions, deletions, substitutions and swapped neighbours as one each", () => {
    expect(editDistance("model", "model")).toBe(0);
    expect(editDistance("modle", "model")).toBe(1);
    expect(editDistance("mode", "model")).toBe(1);
    expect(editDistance("modelx", "model")).toBe(1);
    expect(editDistance("mxdel", "model")).toBe(1);
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("", "abc")).toBe(3);
  });

  it("suggests only a close key, ignoring case", () => {
    expect(closest("APIKEY", ["apiKey", "authFile"])).toBe("apiKey");
    expect(closest("passwrd", ["password", "provider"])).toBe("password");
    expect(closest("colour", ["name", "port"])).toBeUndefined();
    expect(closest("x", [])).toBeUndefined();
  });
});
