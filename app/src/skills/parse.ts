import yaml from "js-yaml";

/**
 * A skill's text read: an Agent Skills `SKILL.md` (front matter `name`, `description`, optional
 * `license`, `compatibility`, `metadata`, `allowed-tools`) or a skill page as the reference
 * publishes them (front matter `title`, `description`, `version`, `author`; its name is the page's
 * file name). Which one the front matter says: `name` or `title`.
 */
export interface ParsedSkill {
  name: string;
  description: string;
  format: "agent-skills" | "skill-page";
  /** `metadata.version` (Agent Skills) or `version` (a skill page), as text. */
  version: string | undefined;
  author: string | undefined;
  /** The title a skill page gives itself. */
  title: string | undefined;
  body: string;
}

/** Agent Skills' names: lower-case letters, digits and single hyphens, at most 64. */
export const SKILL_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const SKILL_TEXT_MAX_BYTES = 256 * 1024;

const AGENT_SKILLS_KEYS = new Set([
  "name",
  "description",
  "license",
  "compatibility",
  "metadata",
  "allowed-tools",
]);
const PAGE_KEYS = new Set(["title", "description", "version", "author"]);

/** What is wrong with a skill's text: the message names the field. */
export class SkillFormatError extends Error {
  override name = "SkillFormatError";
}

/**
 * Reads a skill's text. `fileName` (the page's or SKILL.md's own) names a skill page, which has no
 * `name` of its own: `gym.md` is the skill "gym".
 */
export function parseSkill(text: string, fileName: string): ParsedSkill {
  if (Buffer.byteLength(text) > SKILL_TEXT_MAX_BYTES)
    throw new SkillFormatError("The skill is larger than 256 KB.");
  const match = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(text);
  if (!match)
    throw new SkillFormatError("The skill has no front matter (a YAML block between --- lines at the top).");
  let front: unknown;
  try {
    front = yaml.load(match[1] ?? "", { schema: yaml.JSON_SCHEMA });
  } catch (error) {
    throw new SkillFormatError(
      `The front matter is not valid YAML (${(error as Error).message.split("\n")[0]}).`,
    );
  }
  if (!front || typeof front !== "object" || Array.isArray(front))
    throw new SkillFormatError("The front matter is not a map of fields.");
  const fields = front as Record<string, unknown>;
  const body = match[2] ?? "";
  if ("name" in fields) return agentSkill(fields, body);
  if ("title" in fields) return skillPage(fields, body, fileName);
  throw new SkillFormatError(
    "The front matter has neither 'name' (an Agent Skills SKILL.md) nor 'title' (a skill page).",
  );
}

function agentSkill(fields: Record<string, unknown>, body: string): ParsedSkill {
  unknownFields(fields, AGENT_SKILLS_KEYS);
  const name = checkName(fields.name, "name");
  const description = checkDescription(fields.description);
  const { compatibility, metadata } = fields;
  if (compatibility !== undefined && (typeof compatibility !== "string" || compatibility.length > 500))
    throw new SkillFormatError("Field 'compatibility' must be a text of at most 500 characters.");
  if (
    metadata !== undefined &&
    (!metadata ||
      typeof metadata !== "object" ||
      Array.isArray(metadata) ||
      !Object.values(metadata).every((value) => typeof value === "string"))
  )
    throw new SkillFormatError("Field 'metadata' must be a map of texts.");
  const meta = (metadata ?? {}) as Record<string, string>;
  return {
    name,
    description,
    format: "agent-skills",
    version: shortText(meta.version, "metadata.version"),
    author: shortText(meta.author, "metadata.author"),
    title: undefined,
    body,
  };
}

function skillPage(fields: Record<string, unknown>, body: string, fileName: string): ParsedSkill {
  unknownFields(fields, PAGE_KEYS);
  const title = fields.title;
  if (typeof title !== "string" || title.trim() === "" || title.length > 200)
    throw new SkillFormatError("Field 'title' must be a text of 1–200 characters.");
  const version = fields.version;
  if (version !== undefined && typeof version !== "string" && typeof version !== "number")
    throw new SkillFormatError("Field 'version' must be a number or a short text.");
  const base = fileName
    .replace(/^.*\//, "")
    .replace(/\.(md|markdown)$/i, "")
    .toLowerCase();
  return {
    name: checkName(base, "the file's name"),
    description: checkDescription(fields.description),
    format: "skill-page",
    version: version === undefined ? undefined : shortText(String(version), "version"),
    author: shortText(fields.author, "author"),
    title: title.trim(),
    body,
  };
}

function unknownFields(fields: Record<string, unknown>, allowed: Set<string>): void {
  const unknown = Object.keys(fields).filter((key) => !allowed.has(key));
  if (unknown.length > 0)
    throw new SkillFormatError(`Unknown front matter field(s): ${unknown.slice(0, 5).join(", ")}.`);
}

export function checkName(value: unknown, what: string): string {
  if (typeof value !== "string" || value.length > 64 || !SKILL_NAME.test(value))
    throw new SkillFormatError(
      `${what === "name" ? "Field 'name'" : `The skill's name (${what})`} must be 1–64 lower-case letters, ` +
        "digits and hyphens (no hyphen at either end or twice in a row).",
    );
  return value;
}

function checkDescription(value: unknown): string {
  if (typeof value !== "string" || value.trim() === "" || value.length > 1024)
    throw new SkillFormatError("Field 'description' must be a text of 1–1024 characters.");
  return value.trim();
}

function shortText(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.length > 100)
    throw new SkillFormatError(`Field '${field}' must be a text of at most 100 characters.`);
  return value.trim() || undefined;
}
