import { badRequest, readJsonObject, type Router } from "@stavrobot/common";
import { IdentifierError, cleanIdentifier, parseIdentifier } from "../allowlist/identifiers.js";
import {
  ALLOWLIST_SERVICES,
  type Allowlist,
  type AllowlistLists,
  type AllowlistService,
} from "../allowlist/allowlist.js";

const MAX_ENTRIES = 1_000;
const MAX_NOTE_CHARS = 500;

/**
 * `GET/PUT /api/settings/allowlist` (owner's password): the reference's shapes. Telegram ids are
 * numbers on the wire; the owner's identities always appear and cannot be removed. GET also names
 * the `channels` configured in config.toml: the page shows only their lists (and sends the others
 * back as it read them, so nothing kept for a channel switched off is lost).
 */
export function addAllowlistRoutes(router: Router, allowlist: Allowlist): void {
  router
    .get("/api/settings/allowlist", async () => ({ json: await view(allowlist) }))
    .add("PUT", "/api/settings/allowlist", async ({ req }) => {
      const body = await readJsonObject(req, 1024 * 1024);
      await allowlist.replace(validate(listsOf(body), allowlist.owner));
      return { json: await view(allowlist) };
    });
}

/**
 * The lists of a PUT body: the reference's (the lists at the top) or what GET answers (the lists
 * under `allowlist`, beside `ownerIdentities`), so a client can send back what it read.
 */
function listsOf(body: Record<string, unknown>): Record<string, unknown> {
  const nested = body.allowlist;
  const atTop = ALLOWLIST_SERVICES.some((service) => service in body);
  return !atTop && typeof nested === "object" && nested !== null && !Array.isArray(nested)
    ? (nested as Record<string, unknown>)
    : body;
}

async function view(allowlist: Allowlist): Promise<unknown> {
  const lists = await allowlist.lists();
  return {
    allowlist: { ...lists, telegram: lists.telegram.map(telegramOnWire) },
    ownerIdentities: { ...allowlist.owner, telegram: allowlist.owner.telegram.map(telegramOnWire) },
    channels: allowlist.channels,
  };
}

function telegramOnWire(id: string): string | number {
  return id === "*" ? id : Number.isSafeInteger(Number(id)) ? Number(id) : id;
}

/** The PUT body → lists to store: every entry checked, duplicates dropped, the owner's ids kept, orphan notes pruned. */
export function validate(
  body: Record<string, unknown>,
  owner: Record<AllowlistService, string[]>,
): AllowlistLists {
  const lists: AllowlistLists = { signal: [], telegram: [], whatsapp: [], email: [], notes: {} };
  for (const service of ALLOWLIST_SERVICES) {
    const entries = body[service];
    if (!Array.isArray(entries)) throw badRequest(`'${service}' must be an array`);
    if (entries.length > MAX_ENTRIES) throw badRequest(`'${service}' has more than ${MAX_ENTRIES} entries`);
    const seen = new Set<string>(owner[service]);
    lists[service].push(...owner[service]);
    for (const entry of entries) {
      const id = checkEntry(service, entry);
      if (!seen.has(id)) {
        seen.add(id);
        lists[service].push(id);
      }
    }
  }
  const notes = body.notes ?? {};
  if (typeof notes !== "object" || notes === null || Array.isArray(notes))
    throw badRequest("'notes' must be an object");
  const known = new Set(ALLOWLIST_SERVICES.flatMap((service) => lists[service]));
  for (const [key, note] of Object.entries(notes)) {
    if (typeof note !== "string") throw badRequest(`The note for "${key}" must be a string`);
    if (note.length > MAX_NOTE_CHARS)
      throw badRequest(`The note for "${key}" is longer than ${MAX_NOTE_CHARS} characters`);
    const id = cleanIdentifier(key);
    const normal = known.has(id) ? id : known.has(id.toLowerCase()) ? id.toLowerCase() : undefined;
    if (normal && note.trim()) lists.notes[normal] = note.trim();
  }
  return lists;
}

function checkEntry(service: AllowlistService, entry: unknown): string {
  try {
    return parseIdentifier(service, entry, { wildcard: true });
  } catch (error) {
    if (error instanceof IdentifierError)
      throw badRequest(`Invalid ${service} entry: ${JSON.stringify(entry)}`);
    throw error;
  }
}
