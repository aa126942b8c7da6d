// The app as its own process (the container image runs this): config from the environment.
import { main } from "./run.js";

await main();
