/**
 * @module cli/serve-primary
 * `tokenmint serve` with TOKENMINT_WORKERS above 1: this process is the primary. It starts the
 * workers, all at once: each is this same program (serve.ts's `serveWorker`) listening on the one
 * port with SO_REUSEPORT, so the kernel spreads connections over them. While they load, it checks
 * and initialises the data once (the same start-up as a single process, so a bad setting or a
 * wrong master key is one line on stderr) under the data directory's lock and makes sure no one
 * else holds the port; then it lets them go, and they open the data and listen. Every worker runs
 * the key timer itself; the compare-and-swap on the key set keeps it to one rotation per period.
 *
 * The primary serves no API. It restarts a worker that dies (after 0.5 s, doubling for each
 * crash in a row up to 30 s), runs the log retention, and serves the metrics listener: each
 * scrape asks every worker for its metrics over IPC and merges them with its own (counts add up,
 * see metrics/merge.ts). The counts of a worker that died stay in the totals as last reported:
 * at its last scrape, or in the report a worker sends unasked in each second it answered requests.
 * On SIGTERM/SIGINT/SIGHUP it passes the signal on, waits for every worker to drain and exit, and exits 0.
 */
import type { Subprocess } from "bun";
import type { Config } from "../config/schema.ts";
import type { Clock } from "../context.ts";
import type { Logger } from "../logging/logger.ts";
import { logSigners, SignerFactory } from "../keys/signers/factory.ts";
import { startLogRetention } from "../logging/retention.ts";
import { asyncMetricsHandler } from "../metrics/endpoint.ts";
import { mergeExpositions } from "../metrics/merge.ts";
import { createServiceMetrics, instanceMergeRule, processSources } from "../metrics/service-metrics.ts";
import { finishesWithin } from "../runtime/finishes-within.ts";
import { openContext, StartupError } from "../startup.ts";
import { COMMIT, VERSION } from "../version.ts";
import { DRAIN_TIMEOUT_MS, listen, logSettings, probeListener } from "./serve.ts";
import { stopSignal } from "./stop-signal.ts";
import { isWorkerMessage, METRICS_REPORT_MS, selfCommand, WORKER_ENV, WORKER_SILENCE_LIMIT_MS } from "./worker-ipc.ts";

/** Restart delay after the first crash; doubled for each further crash in a row. */
const RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 30_000;
/** A worker that ran this long before it died starts a new crash series. */
const STABLE_AFTER_MS = 60_000;

/**
 * A worker's crashes in a row once it died after running `ranMs`, from `before` (0 for a new
 * worker), and how long to wait before it starts again: 0.5 s after the first crash of a series,
 * doubled for each further one, up to 30 s.
 */
export function restartAfterCrash(before: number, ranMs: number): { crashes: number; delayMs: number } {
  const crashes = ranMs >= STABLE_AFTER_MS ? 1 : before + 1;
  return { crashes, delayMs: Math.min(MAX_RESTART_DELAY_MS, RESTART_DELAY_MS * 2 ** (crashes - 1)) };
}
/** Longest wait for a worker to start listening. */
const START_TIMEOUT_MS = 30_000;
/** Longest wait for a worker's metrics at a scrape; a silent worker counts with its last answer. */
const METRICS_TIMEOUT_MS = 1_000;
/** Beyond a worker's own drain timeout, how long the primary waits before it kills it. */
const EXIT_GRACE_MS = 5_000;

/**
 * Runs the primary until a signal has stopped every worker; resolves with the exit code. The
 * caller holds the data directory's lock.
 */
export async function servePrimary(config: Config, logger: Logger, clock: Clock): Promise<number> {
  // The workers load their code (most of a process's start) while this one checks the data, on
  // the core it leaves idle; none opens the data before pool.start() lets it.
  const pool = new WorkerPool(config.workers, logger);
  pool.spawn();
  try {
    // The one-time start-up (format, project, master key, first keys, bootstrap key) happens
    // here, before any worker opens the data, so workers only ever find it done. The primary
    // signs nothing: it loads no key ring, and leaves libcrypto alone until its workers answer.
    const ctx = await openContext(config, logger, clock, { announceSigners: false, libcrypto: "never", loadKeys: false });
    const store = ctx.store.description;
    await ctx.store.close();
    return await supervise(config, logger, clock, store, pool);
  } catch (error) {
    // A start-up that failed takes the workers with it.
    await pool.stop("SIGTERM");
    throw error;
  } finally {
    logger.flush?.();
  }
}

async function supervise(config: Config, logger: Logger, clock: Clock, store: string, pool: WorkerPool): Promise<number> {
  const stopping = stopSignal();
  const { host, port, metricsHost, metricsPort, logFile, logRetentionDays, workers } = config;
  // Workers bind with SO_REUSEPORT, which would share the port with another such listener rather
  // than fail: a plain bind first reports a port that anyone holds. checkListeners did one before
  // the data was opened; this one, right before the workers listen, closes the window start-up left.
  await probeListener("api", host, port);
  const own = createServiceMetrics({ ...processSources(), keyStatus: () => undefined, now: () => clock.now() });
  const metricsServer =
    metricsPort === undefined
      ? undefined
      : listen("metrics", metricsHost, metricsPort, {
          maxRequestBodySize: 64 * 1024,
          fetch: asyncMetricsHandler(() => pool.metrics(own.render())),
          development: false,
        });
  try {
    const first = await Promise.race([pool.start().then(() => undefined), stopping]);
    if (first === undefined) {
      logger.info("tokenmint started", { version: VERSION, commit: COMMIT, host, port, metricsPort, alg: config.signingAlg, store, workers });
      logSettings(logger, config);
      await logSigners(logger, new SignerFactory({ mode: config.signer, logger }));
    }
  } catch (error) {
    await metricsServer?.stop(true);
    throw error;
  }
  const stopRetention =
    logFile === undefined ? () => {} : startLogRetention({ logFile, retentionDays: logRetentionDays, now: () => clock.now(), logger });

  const signal = await stopping;
  logger.info("shutting down", { signal });
  stopRetention();
  const clean = await pool.stop(signal as NodeJS.Signals);
  await metricsServer?.stop(true);
  logger.info("stopped");
  return clean ? 0 : 1;
}

interface Slot {
  readonly number: number;
  proc?: Subprocess;
  /** The worker has loaded; it waits for its go (worker-ipc.ts, `awaitGo`) until the pool is open. */
  loaded: boolean;
  ready: boolean;
  startedAt: number;
  /** Crashes in a row (each after less than STABLE_AFTER_MS of running). */
  crashes: number;
  restart?: ReturnType<typeof setTimeout>;
  /** The worker's metrics at the last scrape it answered. */
  lastMetrics?: string;
  /** Settles the first start (pool.spawn, pool.start). */
  started?: { resolve: () => void; reject: (error: Error) => void };
  /** When the worker was last heard from (performance.now(): a clock set forward kills no worker). */
  heardAt: number;
}

/** The workers of the primary: start, restart, metrics, stop. */
class WorkerPool {
  readonly #logger: Logger;
  readonly #slots: Slot[];
  #stopping = false;
  /** start() was called: workers are let go as soon as they have loaded. */
  #open = false;
  /** Every worker of the first spawn listens; rejected when one exits before. */
  #first: Promise<void> = Promise.resolve();
  /** Counters and histograms of workers that have exited, as they last reported them. */
  #retired = "";
  #requestId = 0;
  readonly #pending = new Map<number, (text: string) => void>();
  readonly #watchdog: ReturnType<typeof setInterval>;
  /** When the watchdog last looked (performance.now()). */
  #lastLook = performance.now();

  constructor(count: number, logger: Logger) {
    this.#logger = logger;
    this.#slots = Array.from({ length: count }, (_, i) => ({ number: i + 1, loaded: false, ready: false, startedAt: 0, crashes: 0, heardAt: 0 }));
    this.#watchdog = setInterval(() => this.#killSilent(), METRICS_REPORT_MS);
    this.#watchdog.unref();
  }

  /**
   * Kills a serving worker not heard from for WORKER_SILENCE_LIMIT_MS; #onExit restarts it. A
   * tick that comes late (this process was paused: SIGSTOP, a frozen cgroup, a suspended
   * machine) judges no one: the workers' messages wait unread in the channel meanwhile, so every
   * worker is heard from again as of now.
   */
  #killSilent(): void {
    if (this.#stopping) return;
    const now = performance.now();
    const late = now - this.#lastLook > 2 * METRICS_REPORT_MS;
    this.#lastLook = now;
    if (late) {
      for (const slot of this.#slots) slot.heardAt = now;
      return;
    }
    for (const slot of this.#slots) {
      const silentMs = now - slot.heardAt;
      if (slot.proc === undefined || !slot.ready || silentMs < WORKER_SILENCE_LIMIT_MS) continue;
      this.#logger.error("worker stopped answering; killing it to restart it", { worker: slot.number, pid: slot.proc.pid, silentSeconds: Math.round(silentMs / 1000) });
      slot.ready = false;
      slot.proc.kill("SIGKILL");
    }
  }

  /** Starts every worker at once. Each loads its code, then waits for start() before it opens the data. */
  spawn(): void {
    this.#first = Promise.all(
      this.#slots.map(
        (slot) =>
          new Promise<void>((resolve, reject) => {
            slot.started = { resolve, reject };
            this.#spawn(slot);
          }),
      ),
    ).then(() => undefined);
    // start() hands this on; a worker that exits before then must not be an unhandled rejection.
    this.#first.catch(() => {});
  }

  /**
   * Lets the workers open the data and listen. Resolves when all listen; rejects when one exits
   * first (also before this call) or does not listen within START_TIMEOUT_MS.
   */
  start(): Promise<void> {
    this.#open = true;
    for (const slot of this.#slots) {
      const started = slot.started;
      if (started === undefined) continue;
      const timer = setTimeout(() => started.reject(new StartupError(`worker ${slot.number} did not start within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
      slot.started = {
        resolve: () => (clearTimeout(timer), started.resolve()),
        reject: (error) => (clearTimeout(timer), started.reject(error)),
      };
      if (slot.loaded) this.#go(slot);
    }
    return this.#first;
  }

  #go(slot: Slot): void {
    try {
      slot.proc?.send({ type: "go" });
    } catch {
      // It has exited; #onExit deals with that.
    }
  }

  #spawn(slot: Slot): void {
    slot.loaded = false;
    slot.ready = false;
    slot.startedAt = Date.now();
    slot.proc = Bun.spawn(selfCommand(), {
      env: { ...process.env, [WORKER_ENV]: String(slot.number) },
      stdio: ["ignore", "inherit", "inherit"],
      serialization: "json",
      ipc: (message) => this.#onMessage(slot, message),
      onExit: (proc, code, signal) => this.#onExit(slot, proc, code, signal),
    });
  }

  #onMessage(slot: Slot, message: unknown): void {
    if (!isWorkerMessage(message)) return;
    slot.heardAt = performance.now();
    if (message.type === "loaded") {
      slot.loaded = true;
      if (this.#open && !this.#stopping) this.#go(slot);
    } else if (message.type === "ready") {
      slot.ready = true;
      slot.started?.resolve();
      slot.started = undefined;
    } else if (message.type === "metrics" && message.text !== undefined) {
      slot.lastMetrics = message.text;
      this.#pending.get(message.id)?.(message.text);
    }
  }

  #onExit(slot: Slot, proc: Subprocess, code: number | null, signal: number | string | null): void {
    if (slot.proc !== proc) return;
    slot.proc = undefined;
    slot.ready = false;
    if (slot.lastMetrics !== undefined) {
      this.#retired = mergeExpositions([this.#retired, slot.lastMetrics], (_, type) => (type === "gauge" ? "omit" : "sum"));
      slot.lastMetrics = undefined;
    }
    if (this.#stopping) return;
    const exit = { worker: slot.number, pid: proc.pid, code: code ?? undefined, signal: signal === null ? undefined : String(signal) };
    if (slot.started !== undefined) {
      slot.started.reject(new StartupError(`worker ${slot.number} exited while starting (${exit.signal ?? `exit code ${exit.code}`})`));
      slot.started = undefined;
      return;
    }
    const { crashes, delayMs } = restartAfterCrash(slot.crashes, Date.now() - slot.startedAt);
    slot.crashes = crashes;
    this.#logger.warn("worker exited unexpectedly; restarting", { ...exit, restartInMs: delayMs });
    slot.restart = setTimeout(() => {
      slot.restart = undefined;
      if (!this.#stopping) this.#spawn(slot);
    }, delayMs);
  }

  /** The instance's metrics: `own` merged with every worker's answer. */
  async metrics(own: string): Promise<string> {
    const asked = this.#slots.map((slot) => ({ slot, proc: slot.proc }));
    const answers = await Promise.all(asked.map(({ slot }) => this.#askMetrics(slot)));
    // A worker that exited while the others were awaited has its counts in #retired already
    // (#onExit): its answer would count them twice, and the next scrape would go back.
    const live = answers.filter((text, i): text is string => text !== undefined && asked[i]?.slot.proc === asked[i]?.proc);
    return mergeExpositions([own, ...live, this.#retired], instanceMergeRule);
  }

  async #askMetrics(slot: Slot): Promise<string | undefined> {
    const proc = slot.proc;
    if (proc === undefined || !slot.ready) return slot.lastMetrics;
    const id = ++this.#requestId;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answer = new Promise<string | undefined>((resolve) => {
      this.#pending.set(id, resolve);
      timer = setTimeout(() => resolve(slot.lastMetrics), METRICS_TIMEOUT_MS);
    });
    try {
      proc.send({ type: "metrics", id });
      return await answer;
    } catch {
      return slot.lastMetrics;
    } finally {
      clearTimeout(timer);
      this.#pending.delete(id);
    }
  }

  /**
   * Passes `signal` to every worker and waits for all to exit (killing one that outlasts its
   * drain). A worker not yet let go (not loaded, or the pool not open) has opened nothing and
   * would wait on: it is killed. Resolves with whether every worker sent `signal` stopped by
   * itself with exit code 0; each that did not is logged.
   */
  async stop(signal: NodeJS.Signals): Promise<boolean> {
    // Until now, a worker was let go exactly when it had loaded and the pool was open.
    const letGo = (slot: Slot) => slot.loaded && this.#open;
    this.#stopping = true;
    clearInterval(this.#watchdog);
    const running: Subprocess[] = [];
    /** Workers sent `signal`: each is to stop by itself, with exit code 0. */
    const stopping: { number: number; proc: Subprocess }[] = [];
    for (const slot of this.#slots) {
      if (slot.restart !== undefined) clearTimeout(slot.restart);
      slot.started?.resolve();
      slot.started = undefined;
      if (slot.proc === undefined) continue;
      running.push(slot.proc);
      const wentOn = letGo(slot);
      if (wentOn) stopping.push({ number: slot.number, proc: slot.proc });
      slot.proc.kill(wentOn ? signal : "SIGKILL");
    }
    const exited = await finishesWithin(Promise.all(running.map((proc) => proc.exited)), DRAIN_TIMEOUT_MS + EXIT_GRACE_MS);
    if (!exited) {
      const left = running.filter((proc) => proc.exitCode === null && proc.signalCode === null);
      this.#logger.warn("workers did not stop in time; killing them", { count: left.length });
      for (const proc of left) proc.kill("SIGKILL");
      await Promise.all(left.map((proc) => proc.exited));
    }
    // Its own reason is on stderr (a store that could not close, say).
    const failed = stopping.filter(({ proc }) => proc.exitCode !== 0);
    for (const { number, proc } of failed) this.#logger.error("worker did not stop cleanly", { worker: number, code: proc.exitCode ?? proc.signalCode ?? undefined });
    return exited && failed.length === 0;
  }
}
