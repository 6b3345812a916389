/**
 * End-to-end process helpers: start the real `src/main.ts` with the bun binary that runs the
 * tests, each in its own temp data directory on a free loopback port, collect its output as
 * lines, and stop it with a signal. Every wait is bounded. Tests call `cleanup()` in afterEach,
 * which kills whatever is still running and removes the temp directories.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { base64url } from "jose";

/** The repository root: the working directory of every spawned process. */
export const REPO_ROOT = resolve(import.meta.dir, "../..");
/** The bun binary running the tests (`process.execPath` under `bun test`). */
export const BUN = process.execPath;

const running = new Set<Subprocess>();
const dirs = new Set<string>();

/** Polls `check` until it returns a value other than undefined, or throws after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs = 5000, intervalMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await Bun.sleep(intervalMs);
  }
}

/** Resolves with `promise`, or undefined once `ms` have passed. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: Timer | undefined;
  const timeout = new Promise<undefined>((done) => {
    timer = setTimeout(() => done(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A fresh temp directory, removed by `cleanup()`. */
export function tempDataDir(): string {
  const path = mkdtempSync(join(tmpdir(), "tokenmint-e2e-"));
  dirs.add(path);
  return path;
}

/** A port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = probe.port as number;
  await probe.stop(true);
  return port;
}

/** A fresh master key (base64url of 32 random bytes). */
export const newMasterKey = () => base64url.encode(crypto.getRandomValues(new Uint8Array(32)));

/**
 * A minimal environment: the parent's TOKENMINT_* and CREDENTIALS_DIRECTORY never leak in.
 * Keys whose value is undefined are left out.
 */
export function processEnv(settings: Record<string, string | undefined>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["PATH", "HOME", "TMPDIR", "LANG"]) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  for (const [name, value] of Object.entries(settings)) if (value !== undefined) env[name] = value;
  return env;
}

/** Reads a byte stream into `lines`, one entry per complete line (a final partial line too). */
async function collectLines(stream: ReadableStream<Uint8Array>, lines: string[]): Promise<void> {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of stream) {
    pending += decoder.decode(chunk, { stream: true });
    let newline = pending.indexOf("\n");
    while (newline !== -1) {
      lines.push(pending.slice(0, newline));
      pending = pending.slice(newline + 1);
      newline = pending.indexOf("\n");
    }
  }
  pending += decoder.decode();
  if (pending !== "") lines.push(pending);
}

/** A running tokenmint process and what it has written so far. */
export class TokenmintProcess {
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  /** Resolves with the exit code once the process has exited and its output is fully read. */
  readonly exited: Promise<number>;
  readonly #proc: Subprocess<"ignore", "pipe", "pipe">;

  constructor(args: string[], env: Record<string, string>) {
    this.#proc = Bun.spawn([BUN, "src/main.ts", ...args], { cwd: REPO_ROOT, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    running.add(this.#proc);
    const output = Promise.all([collectLines(this.#proc.stdout, this.stdout), collectLines(this.#proc.stderr, this.stderr)]);
    this.exited = this.#proc.exited.then(async (code) => {
      running.delete(this.#proc);
      // The pipes close with the process; bounded anyway in case a grandchild holds them.
      await within(output, 2000);
      return code;
    });
  }

  get pid(): number {
    return this.#proc.pid;
  }

  /** Whether the process has exited. */
  get done(): boolean {
    return this.#proc.exitCode !== null || this.#proc.signalCode !== null;
  }

  /** The signal that ended the process, if any (its name; a number only for a signal Bun cannot name). */
  get signalCode(): NodeJS.Signals | number | null {
    return this.#proc.signalCode;
  }

  /** Sends `signal` without waiting. */
  signal(signal: NodeJS.Signals): void {
    this.#proc.kill(signal);
  }

  /** Sends `signal` and waits (at most `timeoutMs`) for the exit code; SIGKILLs and throws on timeout. */
  async stop(signal: NodeJS.Signals = "SIGTERM", timeoutMs = 10_000): Promise<number> {
    if (!this.done) this.#proc.kill(signal);
    const code = await within(this.exited, timeoutMs);
    if (code === undefined) {
      this.#proc.kill("SIGKILL");
      await within(this.exited, 5000);
      throw new Error(`process ${this.pid} did not exit within ${timeoutMs} ms of ${signal}`);
    }
    return code;
  }

  /** stdout lines parsed as JSON (throws on a line that is not JSON). */
  logs(): Record<string, unknown>[] {
    return this.stdout.filter((line) => line !== "").map((line) => JSON.parse(line) as Record<string, unknown>);
  }
}

/** Starts `src/main.ts args` (does not wait for anything). */
export function spawnTokenmint(args: string[], env: Record<string, string>): TokenmintProcess {
  return new TokenmintProcess(args, env);
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** stderr split into non-empty lines. */
  stderrLines: string[];
}

/** Runs a command to completion (at most `timeoutMs`, then SIGKILL and throw). */
export async function runTokenmint(args: string[], env: Record<string, string>, timeoutMs = 10_000): Promise<CliResult> {
  const proc = spawnTokenmint(args, env);
  const code = await within(proc.exited, timeoutMs);
  if (code === undefined) {
    await proc.stop("SIGKILL", 5000);
    throw new Error(`'tokenmint ${args.join(" ")}' did not finish within ${timeoutMs} ms; stderr: ${proc.stderr.join("\n")}`);
  }
  const stdout = proc.stdout.join("\n");
  return { code, stdout, stderr: proc.stderr.join("\n"), stderrLines: proc.stderr.filter((line) => line.trim() !== "") };
}

/** A served instance: its process, base URL and settings. */
export interface Server {
  proc: TokenmintProcess;
  url: string;
  port: number;
  dataDir: string;
  env: Record<string, string>;
}

export interface ServerOptions {
  dataDir?: string;
  /**
   * TOKENMINT_* settings on top of data dir, port, master key, ES256 and one process
   * (TOKENMINT_WORKERS=1, so a test's process count does not depend on the machine's cores).
   */
  settings?: Record<string, string | undefined>;
  /** Master key; default a fresh one. Pass `null` to leave TOKENMINT_MASTER_KEY unset. */
  masterKey?: string | null;
  timeoutMs?: number;
}

/**
 * Starts `serve` and waits until `/healthz` answers 200. Throws, with the process's stderr, if it
 * exits first or the deadline passes. Retries on another port when the chosen one was taken.
 */
export async function startServer(options: ServerOptions = {}): Promise<Server> {
  const dataDir = options.dataDir ?? tempDataDir();
  const masterKey = options.masterKey === undefined ? newMasterKey() : options.masterKey;
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const env = processEnv({
      TOKENMINT_DATA_DIR: dataDir,
      TOKENMINT_HOST: "127.0.0.1",
      TOKENMINT_PORT: String(port),
      TOKENMINT_SIGNING_ALG: "ES256",
      TOKENMINT_MASTER_KEY: masterKey ?? undefined,
      TOKENMINT_WORKERS: "1",
      ...options.settings,
    });
    const proc = spawnTokenmint(["serve"], env);
    const url = `http://127.0.0.1:${port}`;
    const healthy = await waitFor(
      "/healthz",
      async () => {
        if (proc.done) return false;
        try {
          return (await fetch(`${url}/healthz`)).status === 200 ? true : undefined;
        } catch {
          return undefined;
        }
      },
      options.timeoutMs ?? 10_000,
    ).catch(() => undefined);
    if (healthy === true) return { proc, url, port, dataDir, env };
    const code = await proc.stop("SIGKILL", 5000);
    if (attempt < 2 && proc.stderr.some((line) => line.includes("already in use"))) continue;
    throw new Error(`server did not become healthy (exit ${code}); stderr: ${proc.stderr.join("\n")}`);
  }
}

/** Sends a management request with `apiKey`; JSON-encodes `body` when given. */
export function api(server: Server, apiKey: string, method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  return fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

/** Creates an API key with the CLI on `server`'s data directory; returns the key. */
export async function createApiKeyWithCli(server: Server, name = "e2e"): Promise<string> {
  const result = await runTokenmint(["apikeys", "create", "--name", name], server.env);
  if (result.code !== 0) throw new Error(`apikeys create failed (${result.code}): ${result.stderr}`);
  return result.stdout.trim();
}

/** Whether a process with `pid` exists (and is not a zombie). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Kills every process still running and removes temp directories. Call in afterEach. */
export async function cleanup(): Promise<void> {
  const procs = [...running];
  for (const proc of procs) proc.kill("SIGKILL");
  await Promise.all(procs.map((proc) => within(proc.exited, 5000)));
  running.clear();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}
