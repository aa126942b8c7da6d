import { chmodSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseConfig, type AppConfig } from "./config.js";

/** A top-level key's new value: a string to write, or undefined to remove the key. */
export type KeyChanges = Readonly<Record<string, string | undefined>>;

const TABLE_HEADER = /^\s*\[/;
const keyLine = (key: string) => new RegExp(`^\\s*${key}\\s*=`);
const commentedKeyLine = (key: string) => new RegExp(`^\\s*#\\s*${key}\\s*=`);

/**
 * config.toml's text with top-level string keys set or removed, everything else as it was: the
 * comments, the other keys, their order and the tables. A key already there is changed on its own
 * line; a new one goes under its commented example (`# apiKey = "..."`) when the file has one, so
 * it sits beside its documentation, else at the end of the top-level keys.
 */
export function setTopLevelKeys(text: string, changes: KeyChanges): string {
  const lines = text.split("\n");
  for (const [key, value] of Object.entries(changes)) {
    if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(key)) throw new Error(`not a bare TOML key: ${key}`);
    const end = topLevelEnd(lines);
    const line = value === undefined ? undefined : `${key} = ${tomlString(value)}`;
    const at = lines.slice(0, end).findIndex((candidate) => keyLine(key).test(candidate));
    if (at !== -1) {
      if (line === undefined) lines.splice(at, 1);
      else lines[at] = line;
      continue;
    }
    if (line === undefined) continue;
    const example = lines.slice(0, end).findIndex((candidate) => commentedKeyLine(key).test(candidate));
    if (example !== -1) lines.splice(example + 1, 0, line);
    else lines.splice(lastKeyBefore(lines, end) + 1, 0, line);
  }
  return lines.join("\n");
}

/** A TOML basic string: JSON's escapes (`\"`, `\\`, `\n`, `\u0001`) are TOML's too. */
function tomlString(value: string): string {
  return JSON.stringify(value).replace(/\u007f/g, "\\u007f");
}

/** The index of the first table header (`[queue]`), or the line count; multi-line strings skipped. */
function topLevelEnd(lines: string[]): number {
  let inMultiline: string | undefined;
  for (const [index, line] of lines.entries()) {
    if (!inMultiline && TABLE_HEADER.test(line)) return index;
    for (const quote of ['"""', "'''"]) {
      const count = line.split(quote).length - 1;
      if (count % 2 === 1 && (!inMultiline || inMultiline === quote)) {
        inMultiline = inMultiline ? undefined : quote;
      }
    }
  }
  return lines.length;
}

/** The last line before `end` that is not blank or a comment (-1 when there is none). */
function lastKeyBefore(lines: string[], end: number): number {
  for (let index = end - 1; index >= 0; index--) {
    const line = (lines[index] ?? "").trim();
    if (line !== "" && !line.startsWith("#")) return index;
  }
  return -1;
}

/**
 * Checks `text` as the app would read it at its next start (a ConfigError naming the key when it
 * would not), then writes it in place of `path`, mode 600, under a temporary name renamed into
 * place: a crash never leaves half a config. Returns the config it holds.
 */
export function writeConfigFile(path: string, text: string): Readonly<AppConfig> {
  const config = parseConfig(text, path);
  const partial = join(dirname(path), `.${basename(path)}.partial`);
  try {
    writeFileSync(partial, text, { mode: 0o600 });
    chmodSync(partial, 0o600);
    renameSync(partial, path);
  } catch (error) {
    rmSync(partial, { force: true });
    throw error;
  }
  return config;
}
