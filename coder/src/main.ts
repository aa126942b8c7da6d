import { runService } from "@stavrobot/common";
import { coderEnvSchema } from "./config.js";
import { buildCoder } from "./service.js";

await runService({
  name: "coder",
  env: coderEnvSchema,
  // The coder's own files are private; what it gives a plugin gets an explicit mode.
  umask: 0o077,
  build: (context) => buildCoder(context),
});
