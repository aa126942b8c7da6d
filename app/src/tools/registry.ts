import type { ServiceClient } from "@stavrobot/common";
import type { AppConfig } from "../boot/config.js";
import type { Database } from "../db/database.js";
import type { FileAreas } from "../files/areas.js";
import type { PluginDetailCache } from "../plugins/detail-cache.js";
import type { ManageCronDeps } from "./manage-cron.js";
import { createDbSearchTool, type DbSearchDeps } from "./db-search.js";
import { createExecuteSqlTool } from "./execute-sql.js";
import { createManageCronTool } from "./manage-cron.js";
import { createManageFilesTool } from "./manage-files.js";
import { createManageKnowledgeTool } from "./manage-knowledge.js";
import { createManagePagesTool } from "./manage-pages.js";
import { createManagePluginsTool } from "./manage-plugins.js";
import { createManageSkillsTool, type ManageSkillsDeps } from "./manage-skills.js";
import { createManageUploadsTool } from "./manage-uploads.js";
import { createRunPluginTool } from "./run-plugin-tool.js";
import { createRunPythonTool } from "./run-python.js";
import { createRequestCodingTaskTool } from "./request-coding-task.js";
import { createTextToSpeechTool } from "./text-to-speech.js";
import { CHANNEL_SOURCES } from "../audience.js";
import { CHANNELS } from "../channels/registry.js";
import { createWebFetchTool } from "./web-fetch.js";
import { LOADABLE_TOOLS, createLoadToolsTool } from "./load-tools.js";
import { createWebSearchTool } from "./web-search.js";
import { createSendMessageTool, type SendToolDeps } from "./send-message.js";
import type { AnyAgentTool } from "./result.js";
import { createManageAgentsTool } from "./manage-agents.js";
import { createManageInterlocutorsTool } from "./manage-interlocutors.js";
import { createSendAgentMessageTool, type SendAgentMessageDeps } from "./send-agent-message.js";
import type { JsonPost, ModelCallMeter } from "../model/one-shot.js";

export interface ToolContext {
  config: Readonly<AppConfig>;
  db: Database;
  /** The file areas of the agent these tools are for (a subagent's are its own). */
  areas: FileAreas;
  timezone: string;
  publicHostname: string;
  pluginRunner: ServiceClient;
  pythonRunner: ServiceClient;
  coder: ServiceClient;
  details: PluginDetailCache;
  scheduler: ManageCronDeps["scheduler"];
  /** What the send tools share (each channel's tool exists only when the channel is configured). */
  messaging: Omit<SendToolDeps, "channel" | "owner" | "areas">;
  /** How one agent's message reaches another (through the queue). */
  enqueueAgentMessage: SendAgentMessageDeps["enqueue"];
  /** How tools that call a model of their own send it a request (the model client's connections). */
  modelPost: JsonPost;
  /** Budget checks and usage records for tools that call a model of their own. */
  modelCallMeter?: (kind: "web_search" | "web_fetch") => ModelCallMeter;
  /** db_search's search by meaning (with `[embeddings]`). */
  semantic?: DbSearchDeps["semantic"];
  /** Where the running turn's outside text came from, if it holds some (`CurrentTurn.outside`). */
  outside?: () => string | undefined;
  /** The installed skills and how their sources are fetched (manage_skills). */
  skills?: Omit<ManageSkillsDeps, "pluginRunner" | "areas">;
  /** The owner's identity per channel (from `[owner]`). */
  ownerIds: {
    telegram?: string | undefined;
    signal?: string | undefined;
    whatsapp?: string | undefined;
    email?: string | undefined;
  };
}

/**
 * The tools the model gets in this configuration: the always-available ones, and each
 * conditional one only when its section is configured (so the prompt and the tool list never
 * promise what is not there). Every file a tool reads, writes or hands on is in `ctx.areas`: the
 * set is built for one agent (a subagent's tools never see the owner's files).
 */
export function buildTools(ctx: ToolContext): AnyAgentTool[] {
  const { config, db, areas } = ctx;
  const conditional: AnyAgentTool[] = [];
  if (config.webSearch) {
    conditional.push(
      createWebSearchTool({
        ...config.webSearch,
        post: ctx.modelPost,
        meter: ctx.modelCallMeter?.("web_search"),
      }),
    );
  }
  if (config.webFetch) {
    conditional.push(
      createWebFetchTool({
        ...config.webFetch,
        post: ctx.modelPost,
        meter: ctx.modelCallMeter?.("web_fetch"),
      }),
    );
  }
  if (config.tts) conditional.push(createTextToSpeechTool({ ...config.tts, filesDir: areas.root }));
  for (const channel of CHANNEL_SOURCES) {
    if (!CHANNELS[channel].configured(config)) continue;
    const owner = { name: config.owner?.name, id: ctx.ownerIds[channel] };
    conditional.push(createSendMessageTool({ ...ctx.messaging, areas, channel, owner }));
  }
  if (ctx.skills)
    conditional.push(createManageSkillsTool({ ...ctx.skills, pluginRunner: ctx.pluginRunner, areas }));
  if (config.coder) {
    conditional.push(createRequestCodingTaskTool({ coder: ctx.coder, pluginRunner: ctx.pluginRunner }));
  }
  const tools: AnyAgentTool[] = [
    createExecuteSqlTool({ db }),
    createManageKnowledgeTool({ db, ...(ctx.outside ? { outside: ctx.outside } : {}) }),
    createDbSearchTool({
      db,
      currentAgentId: ctx.messaging.currentAgentId,
      ...(ctx.semantic ? { semantic: ctx.semantic } : {}),
    }),
    createManageCronTool({
      db,
      timezone: ctx.timezone,
      scheduler: ctx.scheduler,
      ...(ctx.outside ? { outside: ctx.outside } : {}),
    }),
    createManagePagesTool({ db, publicHostname: ctx.publicHostname }),
    createManageFilesTool({ areas }),
    createManageUploadsTool({ areas }),
    createManagePluginsTool({
      pluginRunner: ctx.pluginRunner,
      areas,
      details: ctx.details,
      canCreate: config.coder !== undefined,
    }),
    createRunPluginTool({
      pluginRunner: ctx.pluginRunner,
      filesDir: areas.root,
      details: ctx.details,
      currentInboxId: ctx.messaging.currentInboxId,
    }),
    createRunPythonTool({ pythonRunner: ctx.pythonRunner, filesDir: areas.root }),
    createManageInterlocutorsTool({ db }),
    createManageAgentsTool({ db }),
    createSendAgentMessageTool({
      db,
      currentAgentId: ctx.messaging.currentAgentId,
      enqueue: ctx.enqueueAgentMessage,
    }),
    ...conditional,
  ];
  // Rarely used tools are described only once a conversation loads them (agent/request-shape.ts).
  const onDemand = tools.map((tool) => tool.name).filter((name) => name in LOADABLE_TOOLS);
  if (config.toolsOnDemand && onDemand.length > 0) tools.push(createLoadToolsTool(onDemand));
  return tools;
}
