import type { z } from "zod";

/** At most this many problems (and this many unknown keys) are named in one message. */
const MAX_LISTED = 10;

/**
 * "files.0.data: expected string, received number; message: ..." — short and names every key,
 * but bounded: a body with half a million unknown keys must not produce a multi-megabyte error.
 */
export function formatZodError(error: z.ZodError): string {
  const issues = error.issues.slice(0, MAX_LISTED).map((issue) => {
    const path = issue.path.map(String).join(".");
    const message = issue.code === "unrecognized_keys" ? unknownKeys(issue.keys) : issue.message;
    return path ? `${path}: ${message}` : message;
  });
  const more = error.issues.length - MAX_LISTED;
  if (more > 0) issues.push(`and ${more} more problem${more === 1 ? "" : "s"}`);
  return issues.join("; ");
}

/** `Unrecognized keys: "a", "b" (and 12 more)`. */
export function unknownKeys(keys: readonly string[], label = "Unrecognized keys"): string {
  const shown = keys
    .slice(0, MAX_LISTED)
    .map((key) => JSON.stringify(key.length > 100 ? key.slice(0, 100) + "…" : key));
  const more = keys.length - MAX_LISTED;
  return `${label}: ${shown.join(", ")}${more > 0 ? ` (and ${more} more)` : ""}`;
}
