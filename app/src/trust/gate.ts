import type { AgentMessage } from "@mariozechner/pi-agent-core";
import { errorMessage, type Logger } from "@stavrobot/common";
import { isChannel, isOwnerMessage, startedByNobody, type OwnerContact } from "../audience.js";
import { channelOfSendTool, sendToolOf } from "../channels/registry.js";
import type { InboxEntry } from "../db/inbox.js";
import { MAIN_AGENT_ID } from "../db/people.js";
import type { CurrentTurn } from "../queue/current-turn.js";
import type { ApprovalStore } from "./approvals.js";
import { bringsOutsideText, effectOf, isBuiltIn, type Effect } from "./effects.js";

/**
 * Where a piece of a turn's context came from, when not from the owner, the system or the
 * assistant itself: a person other than the owner, or the outside world. Stored on the message
 * rows (`provenance` in their content), so it stays when the history is read back.
 */
export interface Provenance {
  kind: "contact" | "outside";
  /** Who or what: "Bob (telegram 2002)", "web_fetch", "plugin:weather/forecast". */
  from: string;
  /** Read back from where an earlier turn left it: a memory, or the summary of earlier conversation. */
  via?: "memory" | "summary" | "recall";
}

/** An origin as the owner is told of it. */
function described(origin: Provenance): string {
  const where = {
    memory: "a memory",
    summary: "the summary of earlier conversation",
    recall: "a recalled snippet",
  };
  return origin.via ? `${origin.from} (in ${where[origin.via]})` : origin.from;
}

export const PROVENANCE = "provenance";

/** A message's provenance, if it carries one. */
export function provenanceOf(message: AgentMessage): Provenance | undefined {
  const value = (message as unknown as Record<string, unknown>)[PROVENANCE];
  return value && typeof value === "object" ? (value as Provenance) : undefined;
}

/** The message with its provenance on it. */
export function withProvenance<T extends AgentMessage>(message: T, provenance: Provenance): T {
  return { ...message, [PROVENANCE]: provenance };
}

/** The web addresses in a text, as written (trailing punctuation left out). */
export function addressesIn(text: string): string[] {
  return [...text.matchAll(/https?:\/\/[^\s<>"'()\]]+/g)].map((match) => match[0].replace(/[.,;:!?]+$/, ""));
}

/** An owner's rule letting a call through without asking: `tool` or `tool:action`. */
export function allowedByRules(rules: readonly string[], tool: string, args: unknown): boolean {
  const action =
    typeof args === "object" && args !== null ? (args as { action?: unknown }).action : undefined;
  return rules.some((rule) => rule === tool || (typeof action === "string" && rule === `${tool}:${action}`));
}

/** Where the running turn's outside text came from, and what it may still do. */
interface TurnTrust {
  inboxId: number;
  agentId: number;
  origins: Provenance[];
  /** Outside text this turn itself brought (its message, its tools' results), not only its history. */
  read: boolean;
  /** The owner wrote the message this turn answers (on a console or their own identity). */
  ownerStarted: boolean;
  /** What they wrote, when they did. */
  ownerText: string;
  /**
   * Addresses this turn was given verbatim: in the owner's message, or in outside text it read (a
   * search's results). Fetching one carries nothing of the owner's out: whoever wrote it could not
   * know what the owner's data holds.
   */
  addresses: Set<string>;
  /** No person started it (a schedule, a plugin's result): a call that needs approval is denied. */
  automatic: boolean;
  /** A contact's own turn: its agent answering them on their channel is what it exists for. */
  contact: { channel: string; recipient: string; name: string | undefined } | undefined;
}

export interface TrustGateDeps {
  currentTurn: CurrentTurn;
  owner: OwnerContact;
  approvals: ApprovalStore;
  /** Tells the owner on their channel and in the web admin's notifications. */
  tellOwner: (text: string, key: string) => Promise<void>;
  /** `[trust] allow`: calls the owner lets through without asking. */
  allow: readonly string[];
  /** The owner's name (`[owner] name`): a send to it reaches the owner. */
  ownerName: string | undefined;
  /**
   * Where the outside text behind the owner's labelled memories came from: memories are in every
   * prompt of the owner's agent, so they weigh on its turns as history does.
   */
  memoryOrigins?: () => Promise<string[]>;
  /**
   * Whether the owner says a plugin's tool only reads (`[trust] readOnly`, or an MCP server's
   * `readOnlyHint` where `[trust] readOnlyHints` names the server): it then runs as a read.
   */
  readOnly?: (plugin: string, tool: string) => Promise<boolean>;
  /** `[trust] plugins`: "owner-turns" (default) lets installed tools run in the owner's turns; "ask" asks there too. */
  plugins?: "owner-turns" | "ask";
  logger: Logger;
}

/**
 * The deterministic gate between the model and every tool call. A turn holds outside text when
 * its message is not the owner's (a contact's, another agent's, a plugin's result), when its
 * history since the last compaction holds a message that is (see DECISIONLOG.md, "Outside text in
 * the history"), or once it called a tool that brings outside text in. From then on a call that
 * acts (effects.ts) does not run: it becomes a request to the owner, who approves it once or
 * denies it (`ApprovalStore`); a turn nobody started denies it and tells the owner. The owner's
 * own turns without outside text are not touched, nor a contact's agent answering that contact
 * on their channel.
 */
export class TrustGate {
  private turn: TurnTrust | undefined;

  constructor(private readonly deps: TrustGateDeps) {}

  /**
   * A turn starts: its entry (the queue's current one), its context so far, and the label of the
   * summary of earlier conversation (saveCompaction keeps the labels of what it summarised).
   */
  async begin(
    inboxId: number,
    context: readonly AgentMessage[],
    earlier: { summary?: string | undefined; recalled?: string | undefined } = {},
  ): Promise<void> {
    const entry = this.deps.currentTurn.entry;
    const agentId = entry?.payload.agentId ?? MAIN_AGENT_ID;
    const origins: Provenance[] = [];
    const own = entry ? this.entryOrigin(entry) : undefined;
    if (own) origins.push(own);
    // The message itself is the last of the context: its provenance is this turn's, not history's.
    const history = context.slice(0, -1);
    for (const message of history) {
      const provenance = provenanceOf(message);
      if (provenance && !origins.some((o) => o.from === provenance.from)) origins.push(provenance);
    }
    // What earlier turns left behind: the summary of what was compacted, and labelled memories
    // (the owner's agent's only: a subagent's prompt holds none).
    const labelled = (line: string | undefined, via: "summary" | "recall"): Provenance[] =>
      (line ?? "")
        .split(", ")
        .filter(Boolean)
        .map((from) => ({ kind: "outside" as const, from, via }));
    const standing: Provenance[] = [
      ...labelled(earlier.summary, "summary"),
      ...labelled(earlier.recalled, "recall"),
      ...(agentId === MAIN_AGENT_ID && this.deps.memoryOrigins ? await this.deps.memoryOrigins() : [])
        .flatMap((line) => line.split(", "))
        .map((from) => ({ kind: "outside" as const, from, via: "memory" as const })),
    ];
    for (const origin of standing) if (!origins.some((o) => o.from === origin.from)) origins.push(origin);
    // The person a subagent's turn is for: whoever wrote, or whom a plugin's result answers.
    const replyTo = entry?.payload.replyTo;
    const contact =
      entry && agentId !== MAIN_AGENT_ID
        ? isChannel(entry.source) && entry.sender
          ? { channel: entry.source, recipient: entry.sender, name: entry.payload.from }
          : replyTo
            ? { channel: replyTo.channel, recipient: replyTo.recipient, name: undefined }
            : undefined
        : undefined;
    // The owner wrote it, or asked for a server's prompt in its place (its words are the server's).
    const ownerStarted =
      entry !== undefined &&
      agentId === MAIN_AGENT_ID &&
      (own === undefined || entry.payload.outside !== undefined) &&
      isOwnerMessage(entry, this.deps.owner);
    this.turn = {
      inboxId,
      agentId,
      origins,
      read: own !== undefined,
      ownerStarted,
      ownerText: ownerStarted ? (entry?.payload.message ?? "") : "",
      addresses: new Set(ownerStarted ? addressesIn(entry?.payload.message ?? "") : []),
      automatic: entry ? startedByNobody(entry.source) && entry.source !== "approval" : false,
      contact,
    };
    this.deps.currentTurn.outside = this.originsText();
  }

  /** The turn's origins as one line ("web_fetch, Bob (telegram 2002)"), if it has any. */
  private originsText(): string | undefined {
    const origins = this.turn?.origins ?? [];
    return origins.length > 0 ? origins.map((o) => o.from).join(", ") : undefined;
  }

  /** Where an entry's own message came from, when not from the owner or the system. */
  entryOrigin(entry: Pick<InboxEntry, "source" | "sender" | "payload">): Provenance | undefined {
    const { source, sender } = entry;
    if (source?.startsWith("plugin:")) return { kind: "outside", from: source };
    // A reminder set after outside text (its note may be what that text said to do), or an MCP
    // server's prompt the owner asked for (the server wrote its words).
    if (entry.payload.outside)
      return {
        kind: "outside",
        from: source?.startsWith("cron:")
          ? `${entry.payload.outside} (in a reminder)`
          : entry.payload.outside,
      };
    // Another agent's words: the owner's own agent speaks for the owner; a subagent for its people.
    if (source === "agent" && sender !== String(MAIN_AGENT_ID)) {
      return { kind: "contact", from: entry.payload.from ?? "another agent" };
    }
    if (
      isChannel(source) &&
      !isOwnerMessage(entry, this.deps.owner) &&
      (entry.payload.agentId ?? MAIN_AGENT_ID) !== MAIN_AGENT_ID
    ) {
      return { kind: "contact", from: `${entry.payload.from ?? sender} (${source} ${sender})` };
    }
    return undefined;
  }

  /** Whether the running turn holds outside text, and from where. */
  get origins(): readonly Provenance[] {
    return this.turn?.origins ?? [];
  }

  /**
   * A tool's result came back: a tool that brings outside text marks the turn (and its result),
   * and so does a result that says it holds stored outside text (`details.outside`: a labelled
   * note, a search's hits in a contact's messages, a file a contact sent).
   */
  observe(tool: string, text: string, details?: unknown): Provenance | undefined {
    if (!this.turn) return undefined;
    const stored = (details as { outside?: unknown } | undefined)?.outside;
    const from = bringsOutsideText(tool) ? tool : typeof stored === "string" && stored ? stored : undefined;
    if (from === undefined) return undefined;
    for (const address of addressesIn(text)) this.turn.addresses.add(address);
    const provenance: Provenance = { kind: "outside", from };
    this.turn.read = true;
    if (!this.turn.origins.some((o) => o.from === from)) this.turn.origins.push(provenance);
    this.deps.currentTurn.outside = this.originsText();
    return provenance;
  }

  end(): void {
    this.turn = undefined;
    this.deps.currentTurn.outside = undefined;
  }

  /** Why the call may not run now (the text the model gets instead of its result), or undefined. */
  async check(tool: string, args: unknown): Promise<string | undefined> {
    const turn = this.turn;
    if (!turn || turn.origins.length === 0) return undefined;
    const effect = await this.effectOf(tool, args);
    // Outside text only in the history (an earlier turn's): the owner's own data may still be
    // worked on, nothing leaves (DECISIONLOG.md, "Outside text in the history").
    if (effect !== "acts" && !(effect === "writes" && turn.read)) return undefined;
    if (allowedByRules(this.deps.allow, tool, args)) return undefined;
    if (this.toTheOwner(tool, args)) return undefined;
    if (tool === "web_fetch" && turn.addresses.has(String((args as { url?: unknown })?.url ?? "")))
      return undefined;
    if (turn.ownerStarted) {
      // The owner is here and asked for something: their own data may be worked on.
      if (effect === "writes") return undefined;
      // The plugins and MCP servers the owner installed are theirs to use in their own turns,
      // unless `[trust] plugins = "ask"` (DECISIONLOG.md, "Plugins in the owner's turns").
      if (this.deps.plugins !== "ask" && (tool === "run_plugin_tool" || !isBuiltIn(tool))) return undefined;
      // A message to someone the owner named in this very message, while the outside text is
      // only in the history: what they asked for, not what an earlier page said.
      if (!turn.read && this.namedByOwner(turn, tool, args)) return undefined;
    }
    if (turn.agentId !== MAIN_AGENT_ID) {
      // A subagent does what the owner granted it, for the people assigned to it (the send tools
      // refuse anyone else); what its person's message may not make it do is write to someone else.
      if (channelOfSendTool(tool) === undefined) return undefined;
      if (!turn.contact || this.answersItsContact(turn, tool, args)) return undefined;
    }
    const from = turn.origins.map(described).join(", ");
    const shown = `${tool} ${JSON.stringify(args)}`.slice(0, 600);
    if (turn.automatic) {
      await this.deps
        .tellOwner(
          `A turn nobody started (inbox ${turn.inboxId}) wanted to run ${shown} after reading text from ${from}; it was not run. Ask me to do it if you want it.`,
          `trust-denied:${turn.inboxId}:${tool}`,
        )
        .catch((error: unknown) =>
          this.deps.logger.error("could not tell the owner", { error: errorMessage(error) }),
        );
      return `Not run: this turn holds text from ${from}, and nobody is here to approve ${tool}. The owner was told.`;
    }
    const id = await this.deps.approvals.add({
      agentId: turn.agentId,
      inboxId: turn.inboxId,
      tool,
      args: (typeof args === "object" && args !== null ? args : {}) as Record<string, unknown>,
      askedBy: from,
      replyTo: turn.contact ? { channel: turn.contact.channel, recipient: turn.contact.recipient } : null,
    });
    this.deps.logger.info("a call waits for the owner's approval", { id, tool, from });
    await this.deps
      .tellOwner(
        `Approval needed (request ${id}): after reading text from ${from}, the assistant wants to run ${shown}. ` +
          `Reply "/approve ${id}" to run exactly this once, or "/deny ${id}" (also on the web admin's Home page).`,
        `approval:${id}`,
      )
      .catch((error: unknown) =>
        this.deps.logger.error("could not tell the owner", { error: errorMessage(error) }),
      );
    return (
      `Not run yet: this turn holds text from ${from}, so ${tool} waits for the owner's approval (request ${id}). ` +
      "The owner was asked; do not call it again. If they approve, it runs once and you are told."
    );
  }

  /** The call's effect, lowered to a read for a plugin tool the owner says only reads. */
  private async effectOf(tool: string, args: unknown): Promise<Effect> {
    const effect = effectOf(tool, args);
    if (tool !== "run_plugin_tool" || !this.deps.readOnly) return effect;
    const { plugin, tool: name } = (args ?? {}) as { plugin?: unknown; tool?: unknown };
    if (typeof plugin !== "string" || typeof name !== "string") return effect;
    return (await this.deps.readOnly(plugin, name)) ? "reads-private" : effect;
  }

  /** A send whose recipient the owner's message names (a display name or identifier, as a word). */
  private namedByOwner(turn: TurnTrust, tool: string, args: unknown): boolean {
    if (channelOfSendTool(tool) === undefined) return false;
    const recipient = String((args as { recipient?: unknown })?.recipient ?? "").trim();
    if (recipient.length < 2) return false;
    const escaped = recipient.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    return new RegExp(`(^|[^\\p{L}\\p{N}])${escaped}($|[^\\p{L}\\p{N}])`, "iu").test(turn.ownerText);
  }

  /** A message to the owner themself: nothing leaves them. */
  private toTheOwner(tool: string, args: unknown): boolean {
    const channel = channelOfSendTool(tool);
    if (!channel) return false;
    const recipient = String((args as { recipient?: unknown })?.recipient ?? "")
      .trim()
      .toLowerCase();
    const ownerId = this.deps.owner[channel];
    return (
      recipient === "owner" ||
      (ownerId !== undefined && recipient === ownerId.toLowerCase()) ||
      (this.deps.ownerName !== undefined && recipient === this.deps.ownerName.toLowerCase())
    );
  }

  /** A contact's agent sending to the very person whose message started the turn, on their channel. */
  private answersItsContact(turn: TurnTrust, tool: string, args: unknown): boolean {
    const contact = turn.contact;
    if (!contact || !isChannel(contact.channel) || tool !== sendToolOf(contact.channel)) return false;
    const recipient = String((args as { recipient?: unknown })?.recipient ?? "").trim();
    return (
      recipient === contact.recipient ||
      (contact.name !== undefined && recipient.toLowerCase() === contact.name.toLowerCase())
    );
  }
}
