import { DomainError, readFileNoFollow, resolveInside } from "@stavrobot/common";
import type { Plugin } from "../formats/format.js";
import { SKILL_MAX_BYTES, readSkill } from "./skills.js";

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
