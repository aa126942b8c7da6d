import type { Router } from "@stavrobot/common";
import { collectStatus, type StatusDeps } from "../web/status.js";

/** `GET /api/status` (owner's password): what the home page shows; the shape is `AppStatus`. */
export function addStatusRoutes(router: Router, deps: StatusDeps): Router {
  return router.get("/api/status", async () => ({ json: await collectStatus(deps) }));
}
