/**
 * @module cli/stop-signal
 * The signals that stop a server. Imported first by main.ts: for `serve`, the handlers are in
 * place as the program starts to load, so a SIGTERM that comes while its modules load (tens of
 * milliseconds) stops the server once it has started, with exit 0, instead of ending the process
 * by the signal's default (exit 143).
 */

import { parseArgs } from "./args.ts";

let stopSignalled: Promise<string> | undefined;

/**
 * Resolves with the name of the first SIGTERM, SIGINT or SIGHUP (a terminal that closed: the
 * runtime would otherwise end the process at once, cutting requests in flight). The handlers are
 * installed by the first call (for `serve`, as this module loads) and stay installed, so a second
 * signal (a terminal sends SIGINT to the whole process group, and the primary forwards it again)
 * does not kill the process mid-drain. Every call answers the same promise.
 */
export function stopSignal(): Promise<string> {
  stopSignalled ??= new Promise((resolve) => {
    process.on("SIGTERM", () => resolve("SIGTERM"));
    process.on("SIGINT", () => resolve("SIGINT"));
    process.on("SIGHUP", () => resolve("SIGHUP"));
  });
  return stopSignalled;
}

/** Whether `argv` (the arguments after the program) runs `serve`: its first word as cli/args.ts reads it (a flag's value is no command). */
export function runsServe(argv: readonly string[]): boolean {
  try {
    return parseArgs(argv).words[0] === "serve";
  } catch {
    // A usage error: run.ts says so; no server starts.
    return false;
  }
}

if (runsServe(process.argv.slice(2))) stopSignal();
