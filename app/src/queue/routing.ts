import type { Logger } from "@stavrobot/common";
import { isChannel, type Channel } from "../audience.js";
import type { Queryable } from "../db/database.js";
import { entryOrigin, type InboxPayload } from "../db/inbox.js";
import { MAIN_AGENT_ID, firstNoticeToday, getAgent, interlocutorByIdentity } from "../db/people.js";
import { zonedParts } from "../zoned-date.js";

/** Where a channel message from someone other than the owner goes. */
export type Routed =
  /** To that person's agent: `label` is how the agent sees the sender (their display name). */
  | { kind: "agent"; agentId: number; label: string }
  /** Nowhere: nothing is kept and no turn runs (the owner may have been told, see `PeopleRouter`). */
  | { kind: "dropped" };

/** Where a plugin's message about a run goes when a subagent's turn started the run. */
export type ResultRoute = Required<Pick<InboxPayload, "agentId" | "from">> & Pick<InboxPayload, "replyTo">;

export interface PeopleRouterDeps {
  db: Queryable;
  /** Tells the owner something (on their push channel, else their console), once per `key`. */
  tellOwner: (text: string, key: string) => Promise<void>;
  timezone: string;
  /** A channel's name as people read it ("Telegram"), for the owner's notice. */
  channelTitle: (channel: Channel) => string;
  logger: Logger;
}

/** How long a quoted message may be in a notice to the owner. */
const QUOTE_CHARS = 500;

/**
 * The second gate after the allowlist (the reference's routing): a message from an allowlisted
 * person goes to the agent of their interlocutor record, never to the owner's conversation. A
 * disabled interlocutor is refused. A person with no record, or a record without an agent, is
 * not answered; the owner is told who wrote and what, once per person per day, with how to give
 * them an agent (the reference dropped these silently).
 */
export class PeopleRouter {
  constructor(private readonly deps: PeopleRouterDeps) {}

  async route(channel: Channel, sender: string, text: () => Promise<string | undefined>): Promise<Routed> {
    const { db, logger } = this.deps;
    const person = await interlocutorByIdentity(db, channel, sender);
    if (person && !person.enabled) {
      logger.info("dropped a message from a disabled interlocutor", { channel, sender, id: person.id });
      return { kind: "dropped" };
    }
    const agent =
      person?.agent_id != null && person.agent_id !== MAIN_AGENT_ID
        ? await getAgent(db, person.agent_id)
        : undefined;
    if (person && agent) return { kind: "agent", agentId: agent.id, label: person.display_name };
    const title = this.deps.channelTitle(channel);
    const who = person ? `${person.display_name} (${title} ${sender})` : `${title} ${sender}`;
    const day = Object.values(pick(zonedParts(new Date(), this.deps.timezone))).join("-");
    if (!(await firstNoticeToday(db, `unassigned:${channel}:${sender}`, day))) {
      logger.info("dropped another message from someone with no agent", { channel, sender });
      return { kind: "dropped" };
    }
    const said = (await text())?.trim() ?? "";
    const quote = said.length > QUOTE_CHARS ? `${said.slice(0, QUOTE_CHARS)}…` : said;
    const why = !person
      ? "they are on the allowlist but have no interlocutor record"
      : person.owner
        ? "this identity is in the owner's record, which the main agent answers only from [owner] in config.toml"
        : "their interlocutor record has no subagent assigned";
    const how = person
      ? `To answer them, create a subagent (manage_agents create) and assign it to interlocutor ${person.id} (manage_interlocutors update with agent_id), or on the People page.`
      : `To answer them, create an interlocutor with this identity (manage_interlocutors create, service "${channel}", identifier "${sender}") and a subagent assigned to it (manage_agents create, then agent_id), or on the People page.`;
    await this.deps.tellOwner(
      `${who} wrote, but nobody answers them: ${why}. ` +
        (quote ? `They said: "${quote}"\n\n` : "Their message had no text.\n\n") +
        `${how} Until then their messages are not answered; you are told about them once a day.`,
      `unassigned:${channel}:${sender}:${day}`,
    );
    logger.info("told the owner about a message from someone with no agent", { channel, sender });
    return { kind: "dropped" };
  }

  /**
   * Where a plugin's message about a run started in turn `turn` (an inbox id) goes: back to the
   * subagent whose turn it was, answering the person that turn answered (while they are still
   * enabled and assigned to it), or, for a run the main agent started or a turn not found, to the
   * main agent as every plugin message went before (`undefined`).
   */
  async resultRoute(turn: number): Promise<ResultRoute | undefined> {
    const { db, logger } = this.deps;
    const origin = await entryOrigin(db, turn);
    const agentId = origin?.payload.agentId ?? MAIN_AGENT_ID;
    if (!origin || agentId === MAIN_AGENT_ID) {
      if (!origin) logger.warn("a plugin's message names a turn that does not exist", { turn });
      return undefined;
    }
    if (!(await getAgent(db, agentId))) {
      logger.warn("a plugin's message names a turn of an agent that is gone", { turn, agentId });
      return undefined;
    }
    const person =
      isChannel(origin.source) && origin.sender
        ? { channel: origin.source, recipient: origin.sender }
        : origin.payload.replyTo;
    const record = person && (await interlocutorByIdentity(db, person.channel, person.recipient));
    if (!person || !record?.enabled || record.agent_id !== agentId) {
      return { agentId, from: "a plugin run you started" };
    }
    return {
      agentId,
      from: `a plugin run you started for ${record.display_name}`,
      replyTo: person,
    };
  }
}

function pick(parts: Record<string, string>): { year: string; month: string; day: string } {
  return { year: parts.year ?? "", month: parts.month ?? "", day: parts.day ?? "" };
}
