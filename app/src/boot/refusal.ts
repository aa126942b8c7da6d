import { ConfigError, EXIT_CONFIG, StartRefused, type Logger } from "@stavrobot/common";
import { parseAppEnv } from "./env.js";
import { cannotWrite } from "./instance-lock.js";
import { resolvePaths } from "./paths.js";

/** Exits with the refusal's code and its one line; rethrows what is not a refusal (a bug). */
export function exitForRefusal(error: unknown, env: NodeJS.ProcessEnv, logger: Logger): never {
  if (error instanceof ConfigError) {
    logger.error(error.message);
    process.exit(EXIT_CONFIG);
  }
  const refusal = error instanceof StartRefused ? error : cannotWrite(error, dataDirOf(env));
  if (refusal) {
    logger.error(refusal.message);
    process.exit(refusal.exitCode);
  }
  throw error;
}

function dataDirOf(env: NodeJS.ProcessEnv): string {
  try {
    return resolvePaths(parseAppEnv(env)).dataDir;
  } catch {
    return "the data directory";
  }
}
