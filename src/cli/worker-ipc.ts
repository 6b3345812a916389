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

export type WorkerMessage = ReadyMessage | MetricsMessage;

export function isWorkerMessage(value: unknown): value is WorkerMessage {
  if (typeof value !== "object" || value === null) return false;
  const { type, id } = value as { type?: unknown; id?: unknown };
  return type === "ready" || (type === "metrics" && typeof id === "number");
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
