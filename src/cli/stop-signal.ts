/**
 * @module cli/stop-signal
 * The signals that stop a server. Imported first by main.ts: for `serve`, the handlers are in
 * place as the program starts to load, so a SIGTERM that comes while its modules load (tens of
 * milliseconds) stops the server once it has started, with exit 0, instead of ending the process
 * by the signal's default (exit 143).
 */

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

// The command is the first word that is not an option (cli/args.ts): `serve` takes no value flag before it in practice, and
// a value flag's value that happens to be "serve" would only install the handlers early for another command, which ignores them.
if (process.argv.slice(2).find((word) => !word.startsWith("-")) === "serve") stopSignal();
