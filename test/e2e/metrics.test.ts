/**
 * The real process: with TOKENMINT_METRICS_PORT, `GET /metrics` answers on that port only (the
 * API port says 404); with TOKENMINT_LOG_FILE, log lines go to today's daily file (mode 0640),
 * nothing goes to stdout, and an expired daily file already in the directory is deleted at start.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  api,
  cleanup,
  createApiKeyWithCli,
  freePort,
  newMasterKey,
  processEnv,
  runTokenmint,
  startServer,
  tempDataDir,
  type Server,
  type ServerOptions,
} from "./process.ts";

afterEach(cleanup);

const METRIC_NAMES = [
  "tokenmint_http_requests_total",
  "tokenmint_http_request_duration_seconds",
  "tokenmint_tokens_issued_total",
  "tokenmint_key_rotation_seconds",
  "tokenmint_jwks_keys",
  "tokenmint_process_resident_memory_bytes",
  "tokenmint_process_heap_used_bytes",
  "tokenmint_process_start_time_seconds",
];

/** Starts a server with a metrics listener; picks another metrics port if the first clashes. */
async function startWithMetrics(options: ServerOptions = {}): Promise<{ server: Server; metricsUrl: string }> {
  for (let attempt = 0; ; attempt++) {
    const metricsPort = await freePort();
    try {
      const server = await startServer({ ...options, settings: { ...options.settings, TOKENMINT_METRICS_PORT: String(metricsPort) } });
      return { server, metricsUrl: `http://127.0.0.1:${metricsPort}` };
    } catch (error) {
      if (attempt >= 2) throw error;
    }
  }
}

const utcDay = (time: number) => new Date(time).toISOString().slice(0, 10);

describe("metrics listener", () => {
  test("GET /metrics answers on the metrics port with every metric, and only there", async () => {
    const { server, metricsUrl } = await startWithMetrics();
    const apiKey = await createApiKeyWithCli(server, "metrics");
    const provider = (await (await api(server, apiKey, "POST", "/v1/providers", { name: "PROVIDER-SENTINEL" })).json()) as { id: string };
    const client = (await (
      await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients`, { name: "CLIENT-SENTINEL", audience: "AUD-SENTINEL" })
    ).json()) as { id: string };
    expect((await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients/${client.id}/tokens`)).status).toBe(201);
    expect((await fetch(`${server.url}/.well-known/jwks`)).status).toBe(200);

    const res = await fetch(`${metricsUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await res.text();
    for (const name of METRIC_NAMES) expect(text).toContain(`# TYPE ${name} `);
    expect(text).toContain('tokenmint_tokens_issued_total{alg="ES256"} 1\n');
    expect(text).toContain('tokenmint_http_requests_total{method="POST",route="/v1/providers/:providerId/clients/:clientId/tokens",status="201"} 1\n');
    expect(text).toContain('tokenmint_http_requests_total{method="GET",route="/.well-known/jwks",status="200"} 1\n');
    expect(text).toMatch(/^tokenmint_http_requests_total\{method="GET",route="\/healthz",status="200"\} \d+$/m);
    expect(text).toContain("tokenmint_jwks_keys 2\n");
    expect(text).toMatch(/^tokenmint_key_rotation_seconds \d+(\.\d+)?$/m);
    for (const value of ["SENTINEL", provider.id, client.id]) expect(text).not.toContain(value);

    // The API port does not serve metrics; the metrics port serves nothing else.
    const onApi = await fetch(`${server.url}/metrics`);
    expect(onApi.status).toBe(404);
    expect(((await onApi.json()) as { code: string }).code).toBe("not_found");
    for (const path of ["/", "/v1/providers", "/healthz", "/.well-known/jwks"]) {
      expect((await fetch(`${metricsUrl}${path}`)).status).toBe(404);
    }
    const post = await fetch(`${metricsUrl}/metrics`, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");

    expect(await server.proc.stop()).toBe(0);
    // The metrics listener closed with the server.
    await expect(fetch(`${metricsUrl}/metrics`)).rejects.toThrow();
  }, 30_000);

  test("without TOKENMINT_METRICS_PORT there is no metrics listener", async () => {
    const server = await startServer();
    expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
    const started = server.proc.logs().find((entry) => entry.msg === "tokenmint started");
    expect(started?.metricsPort).toBeUndefined();
    expect(await server.proc.stop()).toBe(0);
  }, 30_000);
});

describe("log files", () => {
  test("serve writes JSON lines to today's file, nothing to stdout, and deletes an expired file at start", async () => {
    const logDir = join(tempDataDir(), "logs");
    mkdirSync(logDir);
    const before = Date.now();
    const yesterday = `tokenmint-${utcDay(before - 86_400_000)}.log`;
    const expired = ["tokenmint-2020-01-01.log", `tokenmint-${utcDay(before - 3 * 86_400_000)}.log`];
    const unrelated = ["tokenmint-2020-01-01.log.gz", "notes-2020-01-01.log", "tokenmint.log", yesterday];
    for (const name of [...expired, ...unrelated]) writeFileSync(join(logDir, name), "old\n");

    const server = await startServer({ settings: { TOKENMINT_LOG_FILE: join(logDir, "tokenmint.log"), TOKENMINT_LOG_RETENTION_DAYS: "1" } });
    const apiKey = await createApiKeyWithCli(server, "files");
    expect((await api(server, apiKey, "POST", "/v1/providers", { name: "payments" })).status).toBe(201);
    expect((await api(server, apiKey, "GET", "/v1/providers")).status).toBe(200);
    expect(await server.proc.stop()).toBe(0);
    const after = Date.now();

    // Nothing on stdout: every line went to the file (flushed before exit).
    expect(server.proc.stdout.filter((line) => line !== "")).toEqual([]);
    // Today's file (and tomorrow's, should the test cross midnight UTC); each line in the file of its date.
    const days = [...new Set([utcDay(before), utcDay(after)])].map((day) => ({ day, name: `tokenmint-${day}.log` }));
    const written = days.filter(({ name }) => existsSync(join(logDir, name)));
    const entries = written.flatMap(({ day, name }) =>
      readFileSync(join(logDir, name), "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => {
          const entry = JSON.parse(line) as Record<string, unknown>;
          expect((entry.time as string).slice(0, 10)).toBe(day);
          return entry;
        }),
    );
    const messages = entries.map((e) => e.msg);
    expect(messages).toContain("tokenmint started");
    expect(messages).toContain("old log files deleted");
    expect(messages.at(-1)).toBe("stopped");
    const requests = entries.filter((e) => e.msg === "request");
    expect(requests.map((e) => `${e.method} ${e.route} ${e.status}`)).toEqual(["POST /v1/providers 201", "GET /v1/providers 200"]);
    for (const { name } of written) expect(statSync(join(logDir, name)).mode & 0o777).toBe(0o640);

    // The expired daily files are gone; everything else is untouched.
    for (const name of expired) expect(existsSync(join(logDir, name))).toBe(false);
    for (const name of unrelated) expect(readFileSync(join(logDir, name), "utf8")).toBe("old\n");
    expect(readdirSync(logDir).sort()).toEqual([...unrelated, ...written.map(({ name }) => name)].sort());
  }, 30_000);
});

describe("start-up refusals", () => {
  /** Runs `serve` that must refuse to start; returns its single stderr line. */
  async function refusedServe(settings: Record<string, string>): Promise<string> {
    const env = processEnv({
      TOKENMINT_DATA_DIR: tempDataDir(),
      TOKENMINT_HOST: "127.0.0.1",
      TOKENMINT_PORT: String(await freePort()),
      TOKENMINT_MASTER_KEY: newMasterKey(),
      ...settings,
    });
    const result = await runTokenmint(["serve"], env, 8000);
    expect(result.code).toBe(1);
    expect(result.stderrLines).toHaveLength(1);
    return result.stderrLines[0] as string;
  }

  test("a metrics port already in use is reported clearly, also when held with SO_REUSEPORT (another server's workers)", async () => {
    const shared = Bun.serve({ hostname: "127.0.0.1", port: 0, reusePort: true, development: false, fetch: () => new Response("taken") });
    try {
      expect(await refusedServe({ TOKENMINT_METRICS_PORT: String(shared.port) })).toBe(
        `tokenmint: 127.0.0.1:${shared.port} is already in use (TOKENMINT_METRICS_PORT)`,
      );
    } finally {
      await shared.stop(true);
    }
    const blocker = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("taken") });
    try {
      expect(await refusedServe({ TOKENMINT_METRICS_PORT: String(blocker.port) })).toBe(
        `tokenmint: 127.0.0.1:${blocker.port} is already in use (TOKENMINT_METRICS_PORT)`,
      );
    } finally {
      await blocker.stop(true);
    }
  }, 20_000);

  test("a log file location that cannot be created is a settings error", async () => {
    const dir = tempDataDir();
    writeFileSync(join(dir, "a-file"), "");
    expect(await refusedServe({ TOKENMINT_LOG_FILE: join(dir, "a-file", "logs", "tokenmint.log") })).toMatch(
      /^tokenmint: invalid settings: TOKENMINT_LOG_FILE: cannot write log files beside .*a-file\/logs\/tokenmint\.log: /,
    );
  }, 20_000);
});
