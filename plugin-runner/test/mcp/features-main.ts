// The features server over stdio (bundled into one file by the tests, like main.ts).
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { buildFeaturesServer } from "./features-server.js";

await buildFeaturesServer().connect(new StdioServerTransport());
