import { randomUUID } from "node:crypto";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { encode } from "@toon-format/toon";
import { fence, guessMimeType, toSafeFilename, type Attachment, type PluginResult } from "@stavrobot/common";
import { RESULT_LIMIT_BYTES, capText } from "../cap.js";

/** How a plugin's run ended, as the runner reports it (a synchronous answer, or an async result). */
export type PluginOutcome = PluginResult["outcome"];

export interface DescribedRun {
  /** Whether the run succeeded (a failure is the tool's error). */
  ok: boolean;
  /** What the model reads. */
  text: string;
  /** The files it returned, saved under `<filesDir>/plugin_output/<plugin>/`. */
  files: Attachment[];
}

/**
 * A plugin's run as the model reads it, the one way for a synchronous tool's answer and an
 * asynchronous result (or an init script's) alike: its output (structured output in TOON) capped
 * at RESULT_LIMIT_BYTES, its files saved in one place and listed, its warnings.
 */
export async function describePluginRun(options: {
  plugin: string;
  /** Absent for the plugin's init script. */
  tool?: string | undefined;
  outcome: PluginOutcome;
  filesDir: string;
}): Promise<DescribedRun> {
  const { plugin, tool, outcome } = options;
  const head = tool ? `The run of tool "${tool}" (plugin "${plugin}")` : `Init script for plugin "${plugin}"`;
  if (!outcome.success) {
    return {
      ok: false,
      text: `${head} failed:\n${fence(capText(outcome.error, RESULT_LIMIT_BYTES, ""))}`,
      files: [],
    };
  }
  const output = typeof outcome.output === "string" ? outcome.output : encode(outcome.output ?? null);
  const shown = capText(output, RESULT_LIMIT_BYTES, "Ask the plugin for less output, if it has a way to.");
  const parts = tool
    ? [`${head} returned:\n${fence(shown)}`]
    : [`${head} completed.` + (shown.trim() ? `\nInit output:\n${fence(shown.trim())}` : "")];
  // "plugin_output" cannot be a plugin name (no underscores), so it never meets "uploads".
  const files = outcome.files?.length
    ? await saveFiles(outcome.files, join(options.filesDir, "plugin_output", plugin))
    : [];
  if (files.length > 0) {
    parts.push(
      `Output files:\n${files.map((file) => `- ${file.storedPath} (${file.size} bytes)`).join("\n")}`,
    );
  }
  if (outcome.warnings?.length) parts.push(outcome.warnings.join("\n"));
  return { ok: true, text: parts.join("\n\n"), files };
}

/** Saves returned files under `dir`, replacing (never following) what is there. */
async function saveFiles(files: { filename: string; data: string }[], dir: string): Promise<Attachment[]> {
  await mkdir(dir, { recursive: true });
  const saved: Attachment[] = [];
  for (const file of files) {
    const name = toSafeFilename(file.filename, "output");
    const data = Buffer.from(file.data, "base64");
    const path = join(dir, name);
    const temp = join(dir, `.tmp-${randomUUID()}`);
    await writeFile(temp, data, { flag: "wx" });
    await rename(temp, path);
    saved.push({
      storedPath: path,
      originalFilename: name,
      mimeType: guessMimeType(name),
      size: data.length,
    });
  }
  return saved;
}
