/**
 * @module cli/worker-ipc
 * What the primary of `serve` (serve-primary.ts) and its workers (serve.ts) say to each other
 * over Bun's IPC channel, and how a process knows it is a worker: the primary starts the same
 * executable with the same arguments and `TOKENMINT_WORKER=<n>` in the environment, with an IPC
 * channel open. The variable alone (no channel) makes no worker, so it cannot be set by mistake to
 * run a server without the data directory's lock.
 */

/** Environment variable naming a worker's number (1..N). */
export const WORKER_ENV = "TOKENMINT_WORKER";

/**
 * Worker → primary: this worker's code is loaded, and it waits for a go before it opens the data.
 * The primary starts its workers before it checks and initialises the data itself, so that they
 * load meanwhile, and lets them go once that is done.
 */
export interface LoadedMessage {
  type: "loaded";
}

/** Primary → worker: the data is ready; open it and listen. */
export interface GoMessage {
  type: "go";
}

/** Worker → primary: the API listener is bound and serving. */
export interface ReadyMessage {
  type: "ready";
}

/**
 * Primary → worker: send your metrics; worker → primary: here they are (the exposition text).
 * A worker also sends them unasked, with id 0, at the end of each METRICS_REPORT_MS in which it
 * answered requests: when it dies, the primary keeps its counts as last reported, so at most
 * that much of them is lost.
 */
export interface MetricsMessage {
  type: "metrics";
  id: number;
  text?: string;
}

/** How often a worker reports its metrics to the primary unasked. */
export const METRICS_REPORT_MS = 1_000;

/**
 * Worker → primary: this worker's event loop runs. Sent each METRICS_REPORT_MS in which it sent
 * no metrics; the primary kills a worker it has heard nothing from for WORKER_SILENCE_LIMIT_MS.
 */
export interface AliveMessage {
  type: "alive";
}

/**
 * How long a serving worker may stay silent before its primary takes it for hung (stopped with
 * SIGSTOP, or its event loop blocked) and kills it, so it is restarted: meanwhile the kernel
 * still gives it its share of new connections, which wait unanswered.
 */
export const WORKER_SILENCE_LIMIT_MS = 10_000;

export type WorkerMessage = LoadedMessage | GoMessage | ReadyMessage | MetricsMessage | AliveMessage;

export function isWorkerMessage(value: unknown): value is WorkerMessage {
  if (typeof value !== "object" || value === null) return false;
  const { type, id } = value as { type?: unknown; id?: unknown };
  return type === "loaded" || type === "go" || type === "ready" || type === "alive" || (type === "metrics" && typeof id === "number");
}

/**
 * In a worker: tells the primary that it has loaded, and waits for its go. Resolves true on the
 * go, false when the primary goes away first (the worker then exits without opening anything). A
 * signal meanwhile does not end the wait: the worker starts and then stops, as any server does
 * that is signalled during start-up, and a primary that stops before it lets its workers go
 * kills them.
 */
export function awaitGo(): Promise<boolean> {
  return new Promise((resolve) => {
    const settle = (go: boolean) => {
      process.off("message", onMessage);
      process.off("disconnect", onDisconnect);
      resolve(go);
    };
    const onMessage = (message: unknown) => {
      if (isWorkerMessage(message) && message.type === "go") settle(true);
    };
    const onDisconnect = () => settle(false);
    process.on("message", onMessage);
    process.on("disconnect", onDisconnect);
    process.send?.({ type: "loaded" } satisfies LoadedMessage);
  });
}

/** This process's worker number, or undefined when it is not a worker of a primary. */
export function workerNumber(env: Record<string, string | undefined>): number | undefined {
  const raw = env[WORKER_ENV];
  if (raw === undefined || process.send === undefined || !/^[1-9]\d{0,2}$/.test(raw)) return undefined;
  return Number(raw);
}

/**
 * The command that runs this program again with the same arguments: the executable alone when it
 * is a compiled tokenmint binary (its code is inside it), else the runtime and the entry script.
 */
export function selfCommand(): string[] {
  const compiled = Bun.main.startsWith("/$bunfs/") || Bun.main.includes("~BUN");
  return [process.execPath, ...(compiled ? [] : [Bun.main]), ...process.argv.slice(2)];
}
