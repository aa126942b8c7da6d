import type { ServiceClient } from "@stavrobot/common";
import type { AppConfig } from "../boot/config.js";
import type { ChannelWiring } from "../channels/wiring.js";
import type { Database } from "../db/database.js";
import { DeliveryFiles } from "../delivery/files.js";
import type { FileAreas } from "../files/areas.js";
import type { JsonPost } from "../model/one-shot.js";
import type { PluginDetailCache } from "../plugins/detail-cache.js";
import type { CurrentTurn } from "../queue/current-turn.js";
import type { Scheduler } from "../scheduler/scheduler.js";
import type { UsageWing } from "../usage/wiring.js";
import { buildTools, type ToolContext } from "./registry.js";
import type { AnyAgentTool } from "./result.js";
import { MAIN_AGENT_ID } from "../db/people.js";
import type { SendAgentMessageDeps } from "./send-agent-message.js";

/** Every agent's tools: the same kinds, each agent's bound to its own file areas. */
export interface ToolSets {
  /** The main agent's (the owner's): every tool this configuration has, on the owner's files. */
  main: AnyAgentTool[];
  /**
   * A subagent's, on its own files only (`agents/<id>/`), made at its first turn; what it is
   * offered of them its record says (`toolsForAgent`).
   */
  forAgent(agentId: number): AnyAgentTool[];
}

/** The tools wing: every tool this configuration has, given what each needs of the other wings. */
export function wireTools(options: {
  config: Readonly<AppConfig>;
  db: Database;
  /** The owner's file areas (each subagent's are below them). */
  areas: FileAreas;
  timezone: string;
  publicHostname: string;
  siblings: { pluginRunner: ServiceClient; pythonRunner: ServiceClient; coder: ServiceClient };
  details: PluginDetailCache;
  scheduler: Scheduler;
  channels: Pick<ChannelWiring, "ownerIds" | "allowlist" | "deliveries" | "worker">;
  deliveryFilesDir: string;
  /** How a tool that calls a model of its own sends it a request (the model client's connections). */
  modelPost: JsonPost;
  usage: Pick<UsageWing, "toolMeter">;
  currentTurn: CurrentTurn;
  /** How one agent's message reaches another: saved in the inbox for it (the queue, wired later). */
  enqueueAgentMessage: SendAgentMessageDeps["enqueue"];
  /** db_search's search by meaning (with `[embeddings]`). */
  semantic?: ToolContext["semantic"];
  /** manage_skills' store and sources. */
  skills?: ToolContext["skills"];
}): ToolSets {
  const { config, channels, siblings, currentTurn } = options;
  const context: ToolContext = {
    config,
    db: options.db,
    areas: options.areas,
    timezone: options.timezone,
    publicHostname: options.publicHostname,
    pluginRunner: siblings.pluginRunner,
    pythonRunner: siblings.pythonRunner,
    coder: siblings.coder,
    details: options.details,
    scheduler: options.scheduler,
    ownerIds: channels.ownerIds,
    modelPost: options.modelPost,
    modelCallMeter: options.usage.toolMeter,
    messaging: {
      allowlist: channels.allowlist,
      deliveryFiles: new DeliveryFiles(options.deliveryFilesDir),
      store: channels.deliveries,
      worker: channels.worker,
      currentInboxId: () => currentTurn.entry?.id,
      currentAgentId: () => currentTurn.entry?.payload.agentId ?? MAIN_AGENT_ID,
      db: options.db,
    },
    enqueueAgentMessage: options.enqueueAgentMessage,
    outside: () => currentTurn.outside,
    ...(options.semantic ? { semantic: options.semantic } : {}),
    ...(options.skills ? { skills: options.skills } : {}),
  };
  const main = buildTools(context);
  const subagents = new Map<number, AnyAgentTool[]>();
  return {
    main,
    forAgent(agentId) {
      if (agentId === MAIN_AGENT_ID) return main;
      let tools = subagents.get(agentId);
      if (!tools) {
        tools = buildTools({ ...context, areas: options.areas.of(agentId) });
        subagents.set(agentId, tools);
      }
      return tools;
    },
  };
}
