import {
  PYTHON_RUN_BODY_LIMIT_BYTES,
  Router,
  pythonRunRequestSchema,
  readValidJson,
} from "@stavrobot/common";
import type { PythonRunner } from "./runner.js";

/**
 * The route table (behind the internal secret; `GET /health` is the skeleton's). The body is
 * checked against the contract (400 naming the field), including file names and base64.
 */
export function buildRoutes(runner: Pick<PythonRunner, "run">): Router {
  return new Router().post("/run", async ({ req }) => {
    const input = await readValidJson(req, PYTHON_RUN_BODY_LIMIT_BYTES, pythonRunRequestSchema);
    return { json: await runner.run(input) };
  });
}
