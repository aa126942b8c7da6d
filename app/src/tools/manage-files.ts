import type { AgentTool } from "@mariozechner/pi-agent-core";
import { StringEnum, Type } from "@mariozechner/pi-ai";
import { copyFile, lstat, mkdir, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { decodeBase64 } from "@stavrobot/common";
import { FileAreaError, type FileAreas } from "../files/areas.js";
import {
  RESULT_LIMIT_BYTES,
  ToolError,
  capText,
  outsideDetails,
  textResult,
  unknownAction,
} from "./result.js";

const actions = [
  "write",
  "read",
  "search",
  "read_lines",
  "write_lines",
  "list",
  "delete",
  "copy",
  "move",
  "help",
] as const;

const parameters = Type.Object({
  action: StringEnum(actions),
  filename: Type.Optional(
    Type.String({ description: "A name in the workspace, or a path under the file areas." }),
  ),
  content: Type.Optional(Type.String({ description: "write, write_lines: the text (or base64 data)." })),
  encoding: Type.Optional(StringEnum(["utf-8", "base64"] as const, { description: "Default utf-8." })),
  pattern: Type.Optional(Type.String({ description: "search: text (or a regex with regex: true)." })),
  regex: Type.Optional(Type.Boolean()),
  from: Type.Optional(Type.Integer({ description: "read_lines/write_lines: first line, from 1." })),
  to: Type.Optional(Type.Integer({ description: "read_lines/write_lines: last line, inclusive." })),
  source: Type.Optional(Type.String()),
  destination: Type.Optional(Type.String()),
});

const MAX_FILE_BYTES = 25 * 1024 * 1024;
const MAX_MATCHES = 100;

/**
 * The reference's files workspace, confined to the agent's file areas (no "..", no symlinks,
 * nothing outside; a subagent's are its own, the owner's hold every subagent's too).
 */
export function createManageFilesTool(deps: { areas: FileAreas }): AgentTool<typeof parameters> {
  const { areas } = deps;
  const help = `manage_files works with files in your workspace (${areas.workspace}); other file areas (uploads, plugin and Python outputs) under ${areas.root} may be named by their absolute path.
Actions:
- write {filename, content, encoding?}: create or replace a file (encoding base64 for binary data); returns its path.
- read {filename, encoding?}: the file's text (or base64).
- search {filename, pattern, regex?}: matching lines as "n: line" (at most ${MAX_MATCHES}).
- read_lines {filename, from, to}: lines from..to (1-based, inclusive).
- write_lines {filename, from, to, content}: replace lines from..to with content (from > to inserts before from; empty content deletes them).
- list {filename?}: the files of the workspace (or of the directory named).
- delete {filename}; copy {source, destination}; move {source, destination}.
- help: this text.
Paths you get here can be passed to plugins as file parameters, to run_python, and attached to messages.${
    areas.isSubagent
      ? ""
      : `\nEach subagent's files (its uploads, workspace, python and plugin_output) are under ${join(areas.root, "agents", "<agent id>")}/: name them by absolute path, and copy a file into a subagent's workspace to give it one.`
  }`;
  const path = async (value: string | undefined, what = "filename"): Promise<string> => {
    if (!value?.trim()) throw new ToolError(`This action needs '${what}'.`);
    try {
      return await areas.resolve(value);
    } catch (error) {
      if (error instanceof FileAreaError) throw new ToolError(error.message);
      throw error;
    }
  };
  const existing = async (value: string | undefined, what = "filename"): Promise<string> => {
    const resolved = await path(value, what);
    const info = await lstat(resolved).catch(() => undefined);
    if (!info?.isFile()) throw new ToolError(`File not found: ${value}`);
    if (info.size > MAX_FILE_BYTES) throw new ToolError(`${value} is larger than 25 MB.`);
    return resolved;
  };
  return {
    name: "manage_files",
    label: "Manage files",
    description:
      "Write, read, search, edit, list, copy, move or delete files in your workspace. Use action 'help' for details.",
    parameters,
    async execute(_id, params) {
      switch (params.action) {
        case "help":
          return textResult(help);
        case "write": {
          const target = await path(params.filename);
          const data =
            params.encoding === "base64"
              ? decodeBase64(params.content ?? "")
              : Buffer.from(params.content ?? "", "utf8");
          if (!data) throw new ToolError("'content' is not valid base64.");
          if (data.length > MAX_FILE_BYTES) throw new ToolError("Files may be at most 25 MB.");
          await mkdir(dirname(target), { recursive: true, mode: 0o700 });
          await writeFile(target, data, { mode: 0o600 });
          return textResult(target);
        }
        case "read": {
          const path = await existing(params.filename);
          const data = await readFile(path);
          const text = params.encoding === "base64" ? data.toString("base64") : data.toString("utf8");
          return textResult(
            capText(text, RESULT_LIMIT_BYTES, "Use read_lines or search for the rest."),
            outsideDetails(areas.outsideOrigin(path)),
          );
        }
        case "search": {
          if (!params.pattern) throw new ToolError("search needs 'pattern'.");
          const path = await existing(params.filename);
          const lines = (await readFile(path, "utf8")).split("\n");
          let test: (line: string) => boolean;
          if (params.regex) {
            let expression: RegExp;
            try {
              expression = new RegExp(params.pattern);
            } catch (error) {
              throw new ToolError(`Invalid regex: ${(error as Error).message}`);
            }
            test = (line) => expression.test(line);
          } else {
            const needle = params.pattern;
            test = (line) => line.includes(needle);
          }
          const matches = lines.flatMap((line, index) => (test(line) ? [`${index + 1}: ${line}`] : []));
          if (matches.length === 0) return textResult("No matches.");
          const shown = matches.slice(0, MAX_MATCHES).join("\n");
          return textResult(
            matches.length > MAX_MATCHES
              ? `${shown}\n... (showing ${MAX_MATCHES} of ${matches.length} matches)`
              : shown,
            outsideDetails(areas.outsideOrigin(path)),
          );
        }
        case "read_lines": {
          const path = await existing(params.filename);
          const lines = splitLines(await readFile(path, "utf8"));
          const { from, to } = range(params.from, params.to, lines.length);
          const body = lines.slice(from - 1, to).join("\n");
          return textResult(
            capText(
              `${body}\n(lines ${from}-${to} of ${lines.length} total)`,
              RESULT_LIMIT_BYTES,
              "Read fewer lines.",
            ),
            outsideDetails(areas.outsideOrigin(path)),
          );
        }
        case "write_lines": {
          const target = await existing(params.filename);
          if (!Number.isInteger(params.from) || !Number.isInteger(params.to) || (params.from as number) < 1) {
            throw new ToolError("write_lines needs integer 'from' (1 or more) and 'to'.");
          }
          const text = await readFile(target, "utf8");
          const trailing = text.endsWith("\n");
          const lines = splitLines(text);
          const from = Math.min(params.from as number, lines.length + 1);
          const count = Math.max(0, Math.min(params.to as number, lines.length) - from + 1);
          const replacement =
            params.content === undefined || params.content === "" ? [] : splitLines(params.content);
          lines.splice(from - 1, count, ...replacement);
          await writeFile(target, lines.join("\n") + (trailing && lines.length > 0 ? "\n" : ""));
          return textResult(`Done. New total line count: ${lines.length}.`);
        }
        case "list": {
          const dir = params.filename ? await path(params.filename) : areas.workspace;
          const files = await listFiles(dir);
          if (files.length === 0) return textResult("No files.");
          const lines = files.map((file) => `${relative(dir, file.path) || file.path} (${file.size} bytes)`);
          return textResult(
            capText(`${dir}:\n${lines.join("\n")}`, RESULT_LIMIT_BYTES, "List a subdirectory."),
          );
        }
        case "delete": {
          await rm(await existing(params.filename), { force: true });
          return textResult(`Deleted ${params.filename}.`);
        }
        case "copy":
        case "move": {
          const source = await existing(params.source, "source");
          const destination = await path(params.destination, "destination");
          await mkdir(dirname(destination), { recursive: true, mode: 0o700 });
          if (params.action === "copy") await copyFile(source, destination);
          else await rename(source, destination);
          return textResult(destination);
        }
        default:
          throw unknownAction(String((params as { action: unknown }).action), actions);
      }
    },
  };
}

function splitLines(text: string): string[] {
  if (text === "") return [];
  return (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n");
}

function range(
  from: number | undefined,
  to: number | undefined,
  total: number,
): { from: number; to: number } {
  const start = Math.min(Math.max(1, from ?? 1), Math.max(total, 1));
  const end = Math.max(start, Math.min(to ?? total, total));
  return { from: start, to: end };
}

async function listFiles(dir: string): Promise<{ path: string; size: number }[]> {
  const out: { path: string; size: number }[] = [];
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await listFiles(path)));
    else if (entry.isFile()) out.push({ path, size: (await lstat(path)).size });
    if (out.length >= 500) break;
  }
  return out;
}
