/**
 * Command-line parsing for fake-signal-cli: the global options, the `daemon` command and its options, as
 * signal-cli's argparse4j parser accepts them (`--flag value` or `--flag=value`; `--http` takes an optional
 * HOST:PORT, default localhost:8080). Anything else exits with status 1, like a parse error.
 */
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";

/** Exits like signal-cli's argument parser does on a bad command line. */
function usageError(message) {
  process.stderr.write(`signal-cli: error: ${message}\n`);
  process.exit(1);
}

/** Parses the global options, the `daemon` command and its options; other commands are not faked. */
export function parseCommandLine(args) {
  const globalValue = new Set([
    ...["--config", "-c", "-a", "--account", "-u", "--username", "-o", "--output"],
    ...["--trust-new-identities", "--service-environment", "--log-file"],
  ]);
  const globalFlags = new Set(["--verbose", "--scrub-log", "--disable-send-log", "--dbus", "--dbus-system"]);
  const daemonValue = new Set(["--receive-mode", "--bus-name"]);
  const daemonOptionalValue = new Set(["--http", "--tcp", "--socket"]);
  const daemonFlags = new Set([
    ...["--send-read-receipts", "--ignore-attachments", "--ignore-stories", "--ignore-avatars"],
    ...["--ignore-stickers", "--no-receive-stdout", "--dbus", "--dbus-system"],
  ]);

  const values = {};
  let command;
  for (let index = 0; index < args.length; index++) {
    const [flag, inline] = splitInlineValue(args[index]);
    const takesValue = command ? daemonValue.has(flag) : globalValue.has(flag);
    const mayTakeValue = command !== undefined && daemonOptionalValue.has(flag);
    if (takesValue || mayTakeValue) {
      const next = args[index + 1];
      let value = inline;
      if (value === undefined && next !== undefined && !next.startsWith("-")) value = args[++index];
      if (value === undefined && takesValue) usageError(`argument ${flag}: expected one argument`);
      values[flag] = value ?? "";
    } else if ((command ? daemonFlags : globalFlags).has(flag)) {
      values[flag] = true;
    } else if (!command && !flag.startsWith("-")) {
      command = flag;
      if (command !== "daemon") usageError(`fake-signal-cli only implements "daemon", not "${command}"`);
    } else {
      usageError(`unrecognized arguments: '${args[index]}'`);
    }
  }
  if (command !== "daemon") usageError("missing command (expected daemon)");
  if (values["--http"] === undefined) usageError("fake-signal-cli only implements daemon --http");
  const defaultDataDir = join(process.env.XDG_DATA_HOME ?? join(homedir(), ".local", "share"), "signal-cli");
  const account = values["-a"] ?? values["--account"] ?? values["-u"] ?? values["--username"];
  const config = values["--config"] ?? values["-c"] ?? defaultDataDir;
  return { account, config, ...parseHostPort(values["--http"] || "localhost:8080") };
}

function splitInlineValue(arg) {
  const equals = arg.startsWith("--") ? arg.indexOf("=") : -1;
  return equals > 0 ? [arg.slice(0, equals), arg.slice(equals + 1)] : [arg, undefined];
}

function parseHostPort(address) {
  const colon = address.lastIndexOf(":");
  const port = Number(address.slice(colon + 1));
  if (colon < 0 || !Number.isInteger(port)) usageError(`invalid --http address: ${address}`);
  return { host: address.slice(0, colon).replace(/^\[(.*)\]$/, "$1"), port };
}
