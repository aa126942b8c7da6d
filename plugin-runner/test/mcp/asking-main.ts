// The asking server over stdio (bundled into one file by the tests, like main.ts).
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { buildAskingServer } from "./asking-server.js";

await buildAskingServer().connect(new StdioServerTransport());
