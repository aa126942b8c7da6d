import { DomainError, readFileNoFollow, resolveInside } from "@stavrobot/common";
import type { Plugin } from "./formats/format.js";

/** A skill's name as Agent Skills has it: lower-case letters, digits and single hyphens, at most 64. */
const SKILL_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const ALLOWED_KEYS = new Set([
  "name",
  "description",
  "license",
  "compatibility",
  "metadata",
  "allowed-tools",
]);
/** A SKILL.md larger than this is not offered: the model reads it whole. */
export const SKILL_MAX_BYTES = 256 * 1024;

export type SkillRead =
  { ok: true; skill: { name: string; description: string }; body: string } | { ok: false; error: string };

/**
 * A SKILL.md read and its frontmatter checked as the Agent Skills format says: a YAML block between
 * `---` lines at the top, with `name` (at most 64 lower-case letters, digits and hyphens, no hyphen
 * at either end or twice in a row) and `description` (1–1024 characters) required, and only
 * `license`, `compatibility` (at most 500 characters), `metadata` (a map of strings) and
 * `allowed-tools` besides.
 */
export async function readSkill(text: string): Promise<SkillRead> {
  if (Buffer.byteLength(text) > SKILL_MAX_BYTES) return { ok: false, error: "it is larger than 256 KB" };
  const match = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(text);
  if (!match)
    return { ok: false, error: "it has no frontmatter (a YAML block between --- lines at the top)" };
  // Loaded when a skill is first read (an Osaurus install, or the model reading one).
  const yaml = (await import("js-yaml")).default;
  let front: unknown;
  try {
    front = yaml.load(match[1] ?? "", { schema: yaml.JSON_SCHEMA });
  } catch (error) {
    return {
      ok: false,
      error: `its frontmatter is not valid YAML (${(error as Error).message.split("\n")[0]})`,
    };
  }
  if (!front || typeof front !== "object" || Array.isArray(front))
    return { ok: false, error: "its frontmatter is not a map of fields" };
  const fields = front as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((key) => !ALLOWED_KEYS.has(key));
  if (unknown.length > 0) return { ok: false, error: `unknown frontmatter field(s): ${unknown.join(", ")}` };
  const { name, description, compatibility, metadata } = fields;
  if (typeof name !== "string" || name.length > 64 || !SKILL_NAME.test(name)) {
    return {
      ok: false,
      error:
        "its name must be 1–64 lower-case letters, digits and hyphens (no hyphen at either end or twice in a row)",
    };
  }
  if (typeof description !== "string" || description.trim() === "" || description.length > 1024)
    return { ok: false, error: "its description must be 1–1024 characters" };
  if (compatibility !== undefined && (typeof compatibility !== "string" || compatibility.length > 500))
    return { ok: false, error: "its compatibility must be a text of at most 500 characters" };
  if (
    metadata !== undefined &&
    (!metadata ||
      typeof metadata !== "object" ||
      Array.isArray(metadata) ||
      !Object.values(metadata).every((value) => typeof value === "string"))
  ) {
    return { ok: false, error: "its metadata must be a map of texts" };
  }
  return { ok: true, skill: { name, description: description.trim() }, body: match[2] ?? "" };
}

/** One of a plugin's skills, its SKILL.md read afresh (and checked again) for the model. */
export async function readPluginSkill(
  plugin: Plugin,
  name: string,
): Promise<{ name: string; description: string; text: string }> {
  const skill = plugin.skills?.find((candidate) => candidate.name === name);
  if (!skill) {
    const known = plugin.skills?.map((candidate) => candidate.name).join(", ") || "none";
    throw new DomainError(
      "not-found",
      `Plugin "${plugin.name}" has no skill "${name.slice(0, 80)}" (its skills: ${known}).`,
    );
  }
  let text: string;
  try {
    text = (await readFileNoFollow(await resolveInside(plugin.dir, skill.file), SKILL_MAX_BYTES)).toString(
      "utf8",
    );
  } catch {
    throw new DomainError(
      "not-found",
      `The skill "${name}" of plugin "${plugin.name}" can no longer be read.`,
    );
  }
  const read = await readSkill(text);
  if (!read.ok)
    throw new DomainError(
      "invalid",
      `The skill "${name}" of plugin "${plugin.name}" is no longer valid: ${read.error}.`,
    );
  return { name: skill.name, description: read.skill.description, text };
}
