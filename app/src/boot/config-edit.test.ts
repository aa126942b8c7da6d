import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "@stavrobot/common";
import { describe, expect, it } from "vitest";
import { setTopLevelKeys, writeConfigFile } from "./config-edit.js";

const EXAMPLE = [
  "# The provider.",
  'provider = "anthropic"',
  'model = "claude-sonnet-4-5" # the model',
  'password = "a-long-password"',
  "",
  "# The key:",
  '# apiKey = "sk-ant-..."',
  "",
  'customPrompt = """',
  "[not a table]",
  '"""',
  "",
  "[queue]",
  "maxRetries = 3",
  "",
].join("\n");

describe("setTopLevelKeys", () => {
  it("changes a key on its own line and keeps comments, other keys and tables", () => {
    const text = setTopLevelKeys(EXAMPLE, { model: "claude-opus-4-1" });
    expect(text).toBe(
      EXAMPLE.replace('model = "claude-sonnet-4-5" # the model', 'model = "claude-opus-4-1"'),
    );
  });

  it("puts a new key under its commented example, and removes one", () => {
    const text = setTopLevelKeys(EXAMPLE, { apiKey: "sk-ant-1", password: undefined });
    expect(text).toContain('# apiKey = "sk-ant-..."\napiKey = "sk-ant-1"\n');
    expect(text).not.toContain("password =");
    expect(text).toContain("[queue]\nmaxRetries = 3");
  });

  it("adds a key without an example after the last top-level key, never into a table or a multi-line string", () => {
    const text = setTopLevelKeys(EXAMPLE, { baseUrl: "http://localhost:11434/v1" });
    expect(text).toContain('"""\nbaseUrl = "http://localhost:11434/v1"\n\n[queue]');
    // A key only in a table is not a top-level key: it is added at the top level.
    const queued = setTopLevelKeys(EXAMPLE, { maxRetries: "x" });
    expect(queued).toContain('maxRetries = "x"\n\n[queue]\nmaxRetries = 3');
  });

  it("writes values TOML reads back exactly, quotes and backslashes included", () => {
    const value = 'a "quoted" \\ key\twith\u0001control';
    const text = setTopLevelKeys("[queue]\n", { apiKey: value });
    expect(text.startsWith(`apiKey = `)).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), "config-edit-"));
    try {
      const path = join(dir, "config.toml");
      writeFileSync(path, "");
      const config = writeConfigFile(
        path,
        setTopLevelKeys(`model = "m"\npassword = "a-long-password"\n`, { apiKey: value }),
      );
      expect(config.apiKey).toBe(value);
      expect(statSync(path).mode & 0o777).toBe(0o600);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a text the app would not start with, and leaves the file as it was", () => {
    const dir = mkdtempSync(join(tmpdir(), "config-edit-"));
    try {
      const path = join(dir, "config.toml");
      writeFileSync(path, EXAMPLE);
      expect(() => writeConfigFile(path, setTopLevelKeys(EXAMPLE, { model: "" }))).toThrow(ConfigError);
      expect(readFileSync(path, "utf8")).toBe(EXAMPLE);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("setTableKeys", () => {
  const WITH_TABLE =
    '[email]\nimapHost = "old.example" # the server\nimapTls = true\n\n[budget]\ndaily = 1\n';

  it("changes, adds and removes keys of one table, leaving the others", async () => {
    const { setTableKeys } = await import("./config-edit.js");
    const text = setTableKeys(WITH_TABLE, "email", {
      imapHost: "imap.example",
      imapPort: 993,
      imapTls: undefined,
      moveTo: "Done",
    });
    expect(text).toBe(
      '[email]\nimapHost = "imap.example"\nimapPort = 993\nmoveTo = "Done"\n\n[budget]\ndaily = 1\n',
    );
  });

  it("adds a table that is not there at the end, and leaves a commented example alone", async () => {
    const { setTableKeys } = await import("./config-edit.js");
    const text = setTableKeys('password = "x"\n# [email]\n# smtpHost = "smtp.example"\n', "email", {
      smtpHost: "smtp.example",
      smtpPort: 587,
    });
    expect(text).toBe(
      'password = "x"\n# [email]\n# smtpHost = "smtp.example"\n\n[email]\nsmtpHost = "smtp.example"\nsmtpPort = 587\n',
    );
    expect(setTableKeys("a = 1\n", "email", { smtpHost: undefined })).toBe("a = 1\n");
  });
});
