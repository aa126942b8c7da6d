import type { UserMessage } from "@mariozechner/pi-ai";
import type { ConversationStore } from "../agent/conversation.js";
import type { TurnEngine, TurnOutcome, TurnStart } from "../agent/turn.js";
import type { StatementPart } from "../db/database.js";
import { MAIN_AGENT_ID } from "../db/people.js";
import { RowWrite } from "../db/row-write.js";
import type { HeldSteer, TurnEngineLike } from "./contracts.js";

/** One agent's conversation and the engine that runs its turns. */
export interface AgentSlot {
  conversation: ConversationStore;
  engine: TurnEngine;
}

/**
 * Every agent's turns behind the one engine the queue drives: the main agent's (the owner's, the
 * slot made at start, unchanged) and each subagent's, made the first time one runs. A subagent has
 * its own conversation (and so its own history and compaction) and its own prompt and tools
 * (`makeSubagent` reads its record at every turn). The queue still runs one turn at a time, so
 * the slot of the running turn (`current`) is the one whose writes end with the entry.
 */
export class AgentTurns implements TurnEngineLike {
  private readonly subagents = new Map<number, AgentSlot>();
  private slot: AgentSlot;

  constructor(
    private readonly main: AgentSlot,
    private readonly makeSubagent: (agentId: number) => AgentSlot,
  ) {
    this.slot = main;
  }

  get busy(): boolean {
    return this.slot.engine.busy;
  }

  /** The slot of the turn running (or run last): its conversation's last writes go with its entry's end. */
  get current(): AgentSlot {
    return this.slot;
  }

  /** Every conversation in memory (to forget or recheck them all). */
  get conversations(): ConversationStore[] {
    return [this.main.conversation, ...[...this.subagents.values()].map((slot) => slot.conversation)];
  }

  run(
    inboxId: number,
    message: UserMessage,
    start?: TurnStart,
    write = RowWrite.written(),
    agentId = MAIN_AGENT_ID,
    steers: HeldSteer[] = [],
  ): Promise<TurnOutcome> {
    this.slot = this.slotOf(agentId);
    return this.slot.engine.run(inboxId, message, start, write, steers);
  }

  /** Steering reaches the running turn (the queue lets only the owner's messages steer the owner's turns). */
  steer(inboxId: number, message: UserMessage): boolean {
    return this.slot.engine.steer(inboxId, message);
  }

  abort(): boolean {
    return this.slot.engine.abort();
  }

  /** The running turn's deferred messages, written with `companions` (its entry's end). */
  flush(companions: StatementPart[]): Promise<void> {
    return this.slot.conversation.flush(companions);
  }

  private slotOf(agentId: number): AgentSlot {
    if (agentId === MAIN_AGENT_ID) return this.main;
    let slot = this.subagents.get(agentId);
    if (!slot) {
      slot = this.makeSubagent(agentId);
      this.subagents.set(agentId, slot);
    }
    return slot;
  }
}
