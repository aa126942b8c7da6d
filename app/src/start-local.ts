/**
 * `npm start`: runs the assistant on this machine without Docker. The app runs in this process
 * (on the embedded PostgreSQL unless DATABASE_URL or PG* variables point at a server); sibling
 * services are started as child processes as they arrive.
 */
import { main } from "./main.js";

await main();
