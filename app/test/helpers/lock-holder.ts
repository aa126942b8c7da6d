/**
 * A launcher-like process for the instance lock's tests: takes the lock of the data directory
 * given as its argument, marks its record stopping when `--stopping` follows, says `locked <pid>`,
 * and holds the lock until SIGTERM (then it exits, releasing it, as a clean stop does).
 */
import { acquireInstanceLock } from "../../src/boot/instance-lock.js";

const [dataDir, flag] = process.argv.slice(2);
if (!dataDir) throw new Error("usage: lock-holder.ts <data directory> [--stopping]");
const lock = await acquireInstanceLock(dataDir);
if (flag === "--stopping") lock.markStopping();
process.on("SIGTERM", () => process.exit(0));
setInterval(() => undefined, 60_000);
process.stdout.write(`locked ${process.pid}\n`);
