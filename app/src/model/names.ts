/**
 * "Did you mean": the names closest to one the owner typed (a provider, a model id), and whether a
 * model id is more likely a misspelling of a listed one than a model released after the list.
 */
import { editDistance } from "@stavrobot/common";
import { idParts } from "./template.js";

/** A dated snapshot's alias: `claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`. */
const withoutDate = (id: string): string => id.replace(/[-@]\d{8}$/, "");

interface Ranked {
  name: string;
  distance: number;
}

function ranked(name: string, candidates: readonly string[]): Ranked[] {
  const wanted = name.toLowerCase();
  const all = new Set(candidates);
  return (
    [...all]
      // A dated snapshot whose alias is listed too is the same model: the alias stands for both.
      .filter((candidate) => withoutDate(candidate) === candidate || !all.has(withoutDate(candidate)))
      .map((candidate) => {
        const lower = candidate.toLowerCase();
        const distance = Math.min(editDistance(wanted, lower), editDistance(wanted, withoutDate(lower)));
        return { name: candidate, distance };
      })
      .sort((a, b) => a.distance - b.distance || a.name.length - b.name.length || (a.name < b.name ? -1 : 1))
  );
}

/**
 * Up to `count` of `candidates` near `name` (a few edits away, case aside; a dated snapshot also
 * by its name without the date), nearest first; none when nothing is near.
 */
export function closestNames(name: string, candidates: readonly string[], count = 3): string[] {
  const all = ranked(name, candidates);
  const best = all[0]?.distance ?? 0;
  const limit = Math.max(2, Math.floor(name.length * 0.4));
  return all
    .filter((entry) => entry.distance <= limit && entry.distance <= best + 2)
    .slice(0, count)
    .map((entry) => entry.name);
}

/** What to say of `name` among `candidates`: the near ones, or else the closest few it has. */
export function suggestion(name: string, candidates: readonly string[]): { names: string[]; text: string } {
  const near = closestNames(name, candidates);
  if (near.length > 0) return { names: near, text: `did you mean ${quotedList(near)}?` };
  const names = ranked(name, candidates)
    .slice(0, 3)
    .map((entry) => entry.name);
  return { names, text: names.length > 0 ? `none is close; it has ${quotedList(names, "and")}` : "" };
}

/** `"a", "b" or "c"`, for a sentence. */
export function quotedList(names: readonly string[], joiner = "or"): string {
  const quoted = names.map((name) => `"${name}"`);
  if (quoted.length <= 1) return quoted.join("");
  return `${quoted.slice(0, -1).join(", ")} ${joiner} ${quoted.at(-1)}`;
}

/** Letters and digits only: `Claude-Sonnet-4.5` and `claude-sonnet-4-5` read the same. */
const compact = (id: string): string => id.toLowerCase().replace(/[^a-z0-9]/g, "");

/**
 * The listed ids `id` looks like a misspelling of, or undefined when it does not look like one: the
 * same letters and digits as a listed id in another spelling (`claude-sonnet-4.5`), or a word no
 * listed id of its family has that is a letter or two from one they have (`claude-sonet-4-5`). A
 * new version of a listed line (`claude-sonnet-5`) or a new line (`claude-mythos-1`) is not one.
 */
export function misspelledIds(id: string, listed: readonly string[]): string[] | undefined {
  const same = listed.filter((candidate) => candidate !== id && compact(candidate) === compact(id));
  if (same.length > 0) return same;
  const wanted = idParts(id);
  const family = listed.filter((candidate) => idParts(candidate).family === wanted.family);
  const known = new Set(family.flatMap((candidate) => [...idParts(candidate).words]));
  for (const word of wanted.words) {
    if (known.has(word)) continue;
    // Two letters or fewer (`o` in gpt-4o) could be anything: not taken for a misspelling.
    if (word.length <= 2) continue;
    const allowed = word.length >= 5 ? 2 : 1;
    const near = [...known].find((other) => editDistance(word, other) <= allowed);
    if (near) {
      const fixed = closestNames(id.toLowerCase().replace(word, near), family);
      if (fixed.length > 0) return fixed;
    }
  }
  return undefined;
}
