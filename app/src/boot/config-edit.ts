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

/** A key's new value in a table: a string, number or boolean to write, or undefined to remove it. */
export type TableChanges = Readonly<Record<string, string | number | boolean | undefined>>;

/**
 * config.toml's text with keys of one table (`[email]`) set or removed, everything else as it was.
 * A key already in the table is changed on its own line, a new one goes after the table's last
 * key; a table that is not there is added at the end (a commented example stays a comment).
 */
export function setTableKeys(text: string, table: string, changes: TableChanges): string {
  if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(table)) throw new Error(`not a bare TOML table name: ${table}`);
  const lines = text.split("\n");
  const header = new RegExp(`^\\s*\\[${table}\\]\\s*(#.*)?$`);
  let start = lines.findIndex((line) => header.test(line));
  if (start === -1) {
    if (Object.values(changes).every((value) => value === undefined)) return text;
    while (lines.length > 0 && lines[lines.length - 1]!.trim() === "") lines.pop();
    lines.push("", `[${table}]`, "");
    start = lines.length - 2;
  }
  for (const [key, value] of Object.entries(changes)) {
    if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(key)) throw new Error(`not a bare TOML key: ${key}`);
    const end = tableEnd(lines, start);
    const at = lines.slice(start + 1, end).findIndex((line) => keyLine(key).test(line));
    const line = value === undefined ? undefined : `${key} = ${tomlValue(value)}`;
    if (at !== -1) {
      if (line === undefined) lines.splice(start + 1 + at, 1);
      else lines[start + 1 + at] = line;
    } else if (line !== undefined) {
      lines.splice(Math.max(lastKeyBefore(lines, end), start) + 1, 0, line);
    }
  }
  return lines.join("\n");
}

/** `text` without table `[table]` (its header and every line up to the next table). */
export function removeTable(text: string, table: string): string {
  if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(table)) throw new Error(`not a bare TOML table name: ${table}`);
  const lines = text.split("\n");
  const header = new RegExp(`^\\s*\\[${table}\\]\\s*(#.*)?$`);
  const start = lines.findIndex((line) => header.test(line));
  if (start === -1) return text;
  lines.splice(start, tableEnd(lines, start) - start);
  return lines.join("\n");
}

/** The index of the line after table `start`'s last line (the next header, or the end). */
function tableEnd(lines: string[], start: number): number {
  for (let index = start + 1; index < lines.length; index++)
    if (TABLE_HEADER.test(lines[index]!)) return index;
  return lines.length;
}

function tomlValue(value: string | number | boolean): string {
  return typeof value === "string" ? tomlString(value) : String(value);
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
