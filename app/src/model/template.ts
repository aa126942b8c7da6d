/**
 * Choosing a model pi-ai lists as the template for one it does not (a model released after the
 * library): the new model is taken to speak the same API, with the same limits and prices, until
 * config.toml says otherwise.
 */

/** Words that mark a release of a model rather than another model: they count only in a tie. */
const QUALIFIERS = new Set(["latest", "preview", "exp", "experimental", "beta", "alpha"]);

/** A number this large is a date or a year (`20250929`, `2024`), not part of a version. */
const DATE_LIKE = 1000;

interface IdParts {
  /** The first segment: the family every candidate must share (`claude`, `gpt`, `gemini`). */
  family: string;
  /** The other alphabetic segments, without qualifiers (`sonnet`, `mini`, `pro`). */
  words: Set<string>;
  qualifiers: number;
  /** The first run of numbers, stopped by a date (`claude-sonnet-4-5-20250929` → [4, 5]). */
  version: number[];
}

/** `claude-3-5-haiku-20241022` → claude · {haiku} · [3, 5]; `gpt-4o-mini` → gpt · {o, mini} · [4]. */
export function idParts(id: string): IdParts {
  const segments = id.toLowerCase().match(/[a-z]+|\d+/g) ?? [];
  const words = new Set<string>();
  let qualifiers = 0;
  const version: number[] = [];
  let versionDone = false;
  for (const [index, segment] of segments.entries()) {
    if (/^\d/.test(segment)) {
      const number = Number(segment);
      if (versionDone || number >= DATE_LIKE) versionDone = true;
      else version.push(number);
      continue;
    }
    if (version.length > 0) versionDone = true;
    if (index === 0) continue;
    if (QUALIFIERS.has(segment)) qualifiers++;
    else words.add(segment);
  }
  return { family: segments[0] ?? "", words, qualifiers, version };
}

/** Negative when `a` is older than `b` ([4] = [4, 0] < [4, 6] < [5]). */
export function compareVersions(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const difference = (a[i] ?? 0) - (b[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}

interface Ranked<T> {
  candidate: T;
  id: string;
  parts: IdParts;
  shared: number;
  extra: number;
}

/**
 * The listed model closest to `id`, or undefined when none is of its family (the same first
 * segment of the id). Closest: the most words shared with `id` (`sonnet`, `mini`, `pro`), then the
 * fewest words `id` lacks; among those the newest that is not newer than `id`'s version (the
 * newest of all when `id` has no version or all are newer); then the one that is not a preview or
 * alias (`latest`), then the shortest id.
 */
export function closestModel<T extends { id: string }>(id: string, candidates: readonly T[]): T | undefined {
  const wanted = idParts(id);
  const ranked: Ranked<T>[] = candidates.flatMap((candidate) => {
    const parts = idParts(candidate.id);
    if (parts.family !== wanted.family || candidate.id === id) return [];
    const shared = [...parts.words].filter((word) => wanted.words.has(word)).length;
    return [{ candidate, id: candidate.id, parts, shared, extra: parts.words.size - shared }];
  });
  if (ranked.length === 0) return undefined;
  const best = (list: Ranked<T>[], score: (entry: Ranked<T>) => number): Ranked<T>[] => {
    const top = Math.max(...list.map(score));
    return list.filter((entry) => score(entry) === top);
  };
  let pool = best(ranked, (entry) => entry.shared);
  pool = best(pool, (entry) => -entry.extra);
  if (wanted.version.length > 0) {
    const notNewer = pool.filter((entry) => compareVersions(entry.parts.version, wanted.version) <= 0);
    if (notNewer.length > 0) pool = notNewer;
  }
  const newest = pool.reduce((a, b) => (compareVersions(a.parts.version, b.parts.version) >= 0 ? a : b));
  pool = pool.filter((entry) => compareVersions(entry.parts.version, newest.parts.version) === 0);
  pool = best(pool, (entry) => -entry.parts.qualifiers);
  pool.sort((a, b) => a.id.length - b.id.length || (a.id < b.id ? -1 : 1));
  return pool[0]?.candidate;
}
