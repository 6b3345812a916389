/**
 * Test helpers: a full AppContext on a temp-dir LMDB store with a fixed, movable clock, and a
 * request function that goes through the fetch handler `serve` listens with (no sockets).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildFetch, type App } from "../../src/app.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { SigningAlg } from "../../src/config/schema.ts";
import type { AppContext } from "../../src/context.ts";
import { createApiKey } from "../../src/core/api-keys.ts";
import { generateMasterKeyText } from "../../src/keys/master-key.ts";
import { createLogger, type Logger } from "../../src/logging/logger.ts";
import { openContext } from "../../src/startup.ts";

/** 2026-01-01T00:00:00Z: the fixed start of every test clock. */
export const T0 = Date.UTC(2026, 0, 1);

/** A clock the test moves by hand. */
export class FakeClock {
  /** How far the wall clock was set forward by `jump`, beyond the time that passed. */
  #jumped = 0;
  constructor(public ms: number = T0) {}
  now = () => this.ms;
  /** The clock that only runs forward: time passes on it as on `now` (`advance`, or `ms` set), but not with a `jump`. */
  elapsed = () => this.ms - this.#jumped;
  advance(seconds: number): void {
    this.ms += seconds * 1000;
  }
  /** The wall clock set forward by `seconds` with no time passing (an NTP step, a suspended machine). */
  jump(seconds: number): void {
    this.ms += seconds * 1000;
    this.#jumped += seconds * 1000;
  }
}

/** A temp directory removed by the returned function. */
export function tempDir(prefix = "tokenmint-test-"): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** Runs `body` with a temp directory (named `prefix…`) that is removed afterwards, whatever happens. */
export async function withTempDir(prefix: string, body: (path: string) => Promise<void>): Promise<void> {
  const dir = tempDir(prefix);
  try {
    await body(dir.path);
  } finally {
    dir.remove();
  }
}

/**
 * The pid of a process that has exited (`true`, run to its end), as a command killed meanwhile
 * left it in a file name. Made sure to be gone: a pid reused this soon fails the test rather than
 * passing it by chance.
 */
export async function deadPid(): Promise<number> {
  const child = Bun.spawn(["true"]);
  await child.exited;
  try {
    process.kill(child.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return child.pid;
  }
  throw new Error(`pid ${child.pid} of an exited process is in use again: run the test again`);
}

export interface TestAppOptions {
  alg?: SigningAlg;
  rotationPeriod?: number;
  publicUrl?: string;
  env?: Record<string, string>;
  /** Reuse an existing data directory (and master key) instead of a fresh one. */
  dataDir?: string;
  masterKey?: string;
  clock?: FakeClock;
  /** Collects log lines when given. */
  logLines?: string[];
  /** Keep the token path's reads in memory, as `serve` does (openContext's `cache`). */
  cache?: boolean;
}

export interface TestApp {
  ctx: AppContext;
  app: App;
  /** The fetch handler `serve` listens with: the app, with the direct lane for token issuance and discovery. */
  fetch: (request: Request) => Response | Promise<Response>;
  clock: FakeClock;
  apiKey: string;
  dataDir: string;
  masterKey: string;
  /** Sends a request through the app; JSON-encodes `body` unless it is a string. */
  request(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  /** Same with the test API key. */
  api(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  /**
   * The app's metrics in the exposition format, as `GET /metrics` would answer. Waits one
   * event-loop turn first: Elysia records a request's metrics just after its answer.
   */
  metrics(): Promise<string>;
  close(): Promise<void>;
}

export async function buildTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const dir = options.dataDir === undefined ? tempDir() : undefined;
  const dataDir = options.dataDir ?? (dir as { path: string }).path;
  const masterKey = options.masterKey ?? generateMasterKeyText();
  const config = loadConfig({
    TOKENMINT_DATA_DIR: dataDir,
    TOKENMINT_MASTER_KEY: masterKey,
    TOKENMINT_SIGNING_ALG: options.alg ?? "ES256",
    TOKENMINT_KEY_ROTATION_PERIOD: String(options.rotationPeriod ?? 86400),
    TOKENMINT_PUBLIC_URL: options.publicUrl ?? "https://tokens.example.test",
    ...options.env,
  });
  const clock = options.clock ?? new FakeClock();
  const logger: Logger = createLogger("debug", (line) => options.logLines?.push(line), clock.now);
  const ctx = await openContext(config, logger, clock, { cache: options.cache });
  const { secret: apiKey } = await createApiKey(ctx.store, ctx.projectId, "test", clock.now());
  const { app, fetch } = buildFetch(ctx);
  const request = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const init: RequestInit = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      if (typeof body !== "string") (init.headers as Record<string, string>)["content-type"] ??= "application/json";
    }
    return Promise.resolve(fetch(new Request(`http://localhost${path}`, init)));
  };
  return {
    ctx,
    app,
    fetch,
    clock,
    apiKey,
    dataDir,
    masterKey,
    request,
    api: (method, path, body, headers = {}) => request(method, path, body, { authorization: `Bearer ${apiKey}`, ...headers }),
    metrics: async () => {
      await new Promise((resolve) => setImmediate(resolve));
      return ctx.metrics.render();
    },
    close: async () => {
      await ctx.keys.stop();
      await ctx.store.close();
      dir?.remove();
    },
  };
}

/** Creates a provider and a client through the API; returns their ids. */
export async function createProviderAndClient(t: TestApp, audience = "https://api.example.test"): Promise<{ providerId: string; clientId: string }> {
  const provider = (await (await t.api("POST", "/v1/providers", { name: "payments" })).json()) as { id: string };
  const client = (await (await t.api("POST", `/v1/providers/${provider.id}/clients`, { name: "billing-worker", audience })).json()) as { id: string };
  return { providerId: provider.id, clientId: client.id };
}
