import { z } from "zod";
import { pluginNameSchema } from "./plugin-runner.js";
import { storableString } from "./wire.js";

/**
 * Wire contract of the coder service (internal port 3002, `Authorization: Bearer <internal
 * secret>` on every route but `GET /health`). The app's `request_coding_task` tool submits a task;
 * the result arrives later as a chat message from source "coder".
 */

/** Task ids name files and idempotency keys, so they are kept to a safe alphabet (a UUID fits). */
export const CODER_TASK_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{7,99}$/;

/** The body of one `POST /code` request. */
export const CODER_BODY_LIMIT_BYTES = 1024 * 1024;

/** `POST /code` → 202 `{taskId}`; 400 for a plugin the coder may not change. */
export const codeRequestSchema = z.strictObject({
  taskId: z.string().regex(CODER_TASK_ID_PATTERN, "8 to 100 letters, digits, - or _"),
  plugin: pluginNameSchema,
  message: storableString().trim().min(1).max(100_000),
});
export type CodeRequest = z.infer<typeof codeRequestSchema>;

export const codeResponseSchema = z.object({ taskId: z.string() });
export type CodeResponse = z.infer<typeof codeResponseSchema>;
