import { CODER_BODY_LIMIT_BYTES, Router, codeRequestSchema, readValidJson } from "@stavrobot/common";
import { inspectPlugin } from "./plugin.js";
import type { TaskQueue } from "./tasks.js";

export interface RouteDeps {
  pluginsDir: string;
  /** Whether the agent runs as the plugin's user (the service is root). */
  asRoot: boolean;
  queue: Pick<TaskQueue, "submit">;
}

/**
 * `POST /code {taskId, plugin, message}` → 202 `{taskId}` once the task is recorded; 400 when the
 * plugin may not be changed (see `inspectPlugin`), 409 for a task id already queued. The skeleton
 * adds `GET /health` and the Bearer check.
 */
export function buildRoutes(deps: RouteDeps): Router {
  return new Router().post("/code", async ({ req }) => {
    const task = await readValidJson(req, CODER_BODY_LIMIT_BYTES, codeRequestSchema);
    await inspectPlugin(deps.pluginsDir, task.plugin, deps.asRoot);
    await deps.queue.submit(task);
    return { status: 202, json: { taskId: task.taskId } };
  });
}
