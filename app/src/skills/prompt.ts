import type { SkillRecord } from "./store.js";

export interface SkillListCaps {
  /** At most this many skills are named. */
  count: number;
  /** The whole list is at most this many bytes (UTF-8). */
  bytes: number;
}

export const DEFAULT_SKILL_LIST_CAPS: SkillListCaps = { count: 30, bytes: 3 * 1024 };
/** One skill's description in the list: the start of it, on one line. */
const DESCRIPTION_CHARS = 160;

/** The list's first line: requests carry manage_skills' definition once the prompt has it. */
export const SKILL_LIST_HEADING = "Skills the owner installed";
const HEADER = `${SKILL_LIST_HEADING} (procedures; read one with manage_skills read before you follow it, only when a request calls for it):`;

/**
 * The approved skills as the system prompt lists them: names and the start of their descriptions
 * only, within `caps`; their bodies come back through manage_skills read. "" when there are none.
 */
export function describeSkillsForPrompt(
  skills: readonly SkillRecord[],
  caps = DEFAULT_SKILL_LIST_CAPS,
): string {
  if (skills.length === 0) return "";
  const lines = [HEADER];
  let bytes = Buffer.byteLength(HEADER);
  let shown = 0;
  for (const skill of skills) {
    if (shown >= caps.count) break;
    const line = `- ${skill.name}: ${oneLine(skill.description)}`;
    // Room is kept for the closing line that says how many were left out.
    if (bytes + Buffer.byteLength(line) + 1 + 80 > caps.bytes) break;
    lines.push(line);
    bytes += Buffer.byteLength(line) + 1;
    shown++;
  }
  const left = skills.length - shown;
  if (left > 0) lines.push(`(${left} more: manage_skills list names them all.)`);
  return lines.join("\n");
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > DESCRIPTION_CHARS ? `${flat.slice(0, DESCRIPTION_CHARS - 1)}…` : flat;
}
