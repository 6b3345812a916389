/**
 * `serve` with TOKENMINT_WORKERS=2: one port served by two worker processes of one primary; a
 * change made through the CLI or through one worker (new or deleted client, revoked API key,
 * rotated or revoked signing key, new project, custom domain) is seen by every worker within a
 * second; a worker loads libcrypto only once it signs RS256, and only the primary logs the
 * signers; the metrics listener reports the whole instance; a killed worker is restarted; workers
 * never outlive their primary. The workers load while the primary checks and initialises the data,
 * and open it only after: a primary that refuses the data leaves no worker behind.
 *
 * Requests go on fresh connections (`Connection: close`), so the kernel spreads them over both
 * workers; the request log names the worker that answered, which shows that both did.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeProtectedHeader, type JSONWebKeySet } from "jose";
import { METRICS_REPORT_MS, WORKER_SILENCE_LIMIT_MS } from "../../src/cli/worker-ipc.ts";
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import { cleanup, freePort, isAlive, newMasterKey, runTokenmint, startServer, waitFor, type Server, type ServerOptions } from "./process.ts";

afterEach(cleanup);

const WORKERS = 2;
/** Requests per batch. */
const BATCH = 16;
/** Batches sent after a change, at most, until both workers have answered. */
const MAX_BATCHES = 10;

interface Instance {
  server: Server;
  apiKey: string;
  /** Worker number → pid, from the "worker started" lines. */
  pids: Map<number, number>;
  metricsUrl?: string;
}

async function startInstance(options: ServerOptions = {}, withMetrics = false): Promise<Instance> {
  const metricsPort = withMetrics ? String(await freePort()) : undefined;
  const server = await startServer({ ...options, settings: { TOKENMINT_WORKERS: String(WORKERS), TOKENMINT_METRICS_PORT: metricsPort, ...options.settings } });
  await waitFor("the instance to start", () => (server.proc.logs().some((line) => line.msg === "tokenmint started") ? true : undefined));
  const apiKey = await cli(server, "apikeys", "create", "--name", "workers");
  return { server, apiKey, pids: workerPids(server), metricsUrl: metricsPort === undefined ? undefined : `http://127.0.0.1:${metricsPort}` };
}

/** The latest pid of each worker. */
function workerPids(server: Server): Map<number, number> {
  const pids = new Map<number, number>();
  for (const line of server.proc.logs()) if (line.msg === "worker started") pids.set(line.worker as number, line.pid as number);
  return pids;
}

async function cli(server: Server, ...args: string[]): Promise<string> {
  const result = await runTokenmint(args, server.env);
  if (result.code !== 0) throw new Error(`tokenmint ${args.join(" ")} exited ${result.code}: ${result.stderr}`);
  return result.stdout.trim();
}

/** A request on its own connection. */
function fresh(server: Server, path: string, init: { method?: string; apiKey?: string; body?: unknown } = {}): Promise<Response> {
  const headers: Record<string, string> = { connection: "close" };
  if (init.apiKey !== undefined) headers.authorization = `Bearer ${init.apiKey}`;
  if (init.body !== undefined) headers["content-type"] = "application/json";
  return fetch(`${server.url}${path}`, { method: init.method ?? "GET", headers, body: init.body === undefined ? undefined : JSON.stringify(init.body), keepalive: false });
}

/** The workers named by "request" log lines of `route` written after line `from` of stdout. */
function answeringWorkers(server: Server, from: number, route: string): number[] {
  return server.proc.stdout
    .slice(from)
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === "request" && line.route === route)
    .map((line) => line.worker as number);
}

/**
 * Sends batches of requests on fresh connections, at once (no waiting after the change): every
 * request must `pass`, until the request log shows that every worker answered some (the kernel
 * spreads connections by their addresses, so one batch may land on one worker).
 */
async function seenByEveryWorker(server: Server, what: string, route: string, send: () => Promise<Response>, pass: (res: Response) => Promise<boolean>) {
  const batch = async () => (await Promise.all(Array.from({ length: BATCH }, async () => pass(await send())))).every(Boolean);
  const from = server.proc.stdout.length;
  let workers = new Set<number>();
  for (let sent = 1; sent <= MAX_BATCHES && workers.size < WORKERS; sent++) {
    expect({ what, passed: await batch() }).toEqual({ what, passed: true });
    const seen = await waitFor("the request log of the batches", () => {
      const lines = answeringWorkers(server, from, route);
      return lines.length >= sent * BATCH ? lines : undefined;
    });
    workers = new Set(seen);
  }
  expect([...workers].sort()).toEqual([1, 2]);
}

const TOKENS = "/v1/providers/:providerId/clients/:clientId/tokens";

async function providerAndClient(instance: Instance): Promise<{ providerId: string; clientId: string; tokenPath: string }> {
  const { server, apiKey } = instance;
  const provider = (await (await fresh(server, "/v1/providers", { method: "POST", apiKey, body: { name: "workers" } })).json()) as { id: string };
  const res = await fresh(server, `/v1/providers/${provider.id}/clients`, { method: "POST", apiKey, body: { name: "c", audience: "https://api.workers.test" } });
  expect(res.status).toBe(201);
  const clientId = ((await res.json()) as { id: string }).id;
  return { providerId: provider.id, clientId, tokenPath: `/v1/providers/${provider.id}/clients/${clientId}/tokens` };
}

const kidOf = async (res: Response) => (res.status === 201 ? decodeProtectedHeader(((await res.json()) as { accessToken: string }).accessToken).kid : undefined);
const jwksKids = async (res: Response) => ((await res.json()) as JSONWebKeySet).keys.map((k) => k.kid);
const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")[1]);

/** Waits until worker `number`, whose process `victim` ended, runs again as a new child of the primary. */
async function expectReplaced(server: Server, number: number, victim: number): Promise<void> {
  const replacement = await waitFor(`worker ${number} to start again`, () => {
    const pid = workerPids(server).get(number);
    return pid !== victim ? pid : undefined;
  }, 10_000);
  expect(isAlive(victim)).toBe(false);
  expect(parentOf(replacement as number)).toBe(server.proc.pid);
}

describe(`serve with ${WORKERS} workers`, () => {
  test("one port is served by two worker processes of the primary", async () => {
    const instance = await startInstance();
    const { server, pids } = instance;
    expect([...pids.keys()].sort()).toEqual([1, 2]);
    const children = [...pids.values()];
    expect(new Set(children).size).toBe(2);
    for (const pid of children) {
      expect(pid).not.toBe(server.proc.pid);
      expect(parentOf(pid)).toBe(server.proc.pid);
    }
    const started = server.proc.logs().find((line) => line.msg === "tokenmint started");
    expect(started?.workers).toBe(2);
    // Only the primary holds the data directory's lock.
    expect(readFileSync(`${server.dataDir}/serve.pid`, "utf8").split("\n")[0]).toBe(String(server.proc.pid));
    await seenByEveryWorker(server, "both workers to answer", "/v1/providers", () => fresh(server, "/v1/providers", { apiKey: instance.apiKey }), async (res) => res.status === 200);
    expect(await server.proc.stop()).toBe(0);
  }, 30_000);

  test("under load, the workers' log lines on the stdout they share stay whole, one per request", async () => {
    const instance = await startInstance();
    const { server, apiKey } = instance;
    const { tokenPath } = await providerAndClient(instance);
    const from = server.proc.stdout.length;
    const requests = 800;
    // All at once: each worker answers many requests a turn and writes their lines together.
    const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
    const statuses = await Promise.all(Array.from({ length: requests }, async () => (await fetch(`${server.url}${tokenPath}`, { method: "POST", headers, body: "{}" })).status));
    expect(new Set(statuses)).toEqual(new Set([201]));
    // Every stdout line parses as JSON (answeringWorkers throws on one that does not).
    const workers = await waitFor("a request line per token", () => {
      const seen = answeringWorkers(server, from, TOKENS);
      return seen.length >= requests ? seen : undefined;
    });
    expect(workers).toHaveLength(requests);
    expect(new Set(workers)).toEqual(new Set([1, 2]));
    expect(await server.proc.stop()).toBe(0);
  }, 30_000);

  test("a client created or deleted through one worker is seen by every worker from the next request on", async () => {
    const instance = await startInstance();
    const { server, apiKey } = instance;
    const { providerId, clientId, tokenPath } = await providerAndClient(instance);
    await seenByEveryWorker(server, "the new client on every worker", TOKENS, () => fresh(server, tokenPath, { method: "POST", apiKey }), async (res) => res.status === 201);
    expect((await fresh(server, `/v1/providers/${providerId}/clients/${clientId}`, { method: "DELETE", apiKey })).status).toBe(204);
    await seenByEveryWorker(server, "the deleted client gone from every worker", TOKENS, () => fresh(server, tokenPath, { method: "POST", apiKey }), async (res) => res.status === 404);
  }, 30_000);

  test("a project created with the CLI, and its custom domain set through one worker, are served by every worker from the next request on", async () => {
    const instance = await startInstance();
    const { server } = instance;
    await cli(server, "projects", "create", "--slug", "acme");
    const apiKey = await cli(server, "apikeys", "create", "--project", "acme", "--name", "acme");
    const project = async (res: Response) => (res.status === 200 ? ((await res.json()) as { slug: string; issuer: string }) : undefined);
    const send = () => fresh(server, "/v1/project", { apiKey });
    await seenByEveryWorker(server, "the new project on every worker", "/v1/project", send, async (res) => (await project(res))?.slug === "acme");
    expect((await fresh(server, "/v1/project", { method: "PATCH", apiKey, body: { customDomain: "auth.acme.test" } })).status).toBe(200);
    await seenByEveryWorker(server, "the custom domain on every worker", "/v1/project", send, async (res) => (await project(res))?.issuer === "http://auth.acme.test");
    for (let i = 0; i < BATCH; i++) {
      const res = await fetch(`${server.url}/.well-known/openid-configuration`, { headers: { host: "auth.acme.test", connection: "close" } });
      expect(((await res.json()) as { issuer: string }).issuer).toBe("http://auth.acme.test");
    }
  }, 30_000);

  test("a worker maps libcrypto only once it holds an RS256 key; its primary says which signers the machine uses", async () => {
    const instance = await startInstance();
    const { server } = instance;
    const mapsLibcrypto = (pid: number) => readFileSync(`/proc/${pid}/maps`, "utf8").includes("libcrypto.so");
    // The primary writes the line once its workers answer, after "tokenmint started".
    await waitFor("the signers line", () => (server.proc.logs().some((line) => line.msg === "signers") ? true : undefined));
    const signersLines = server.proc.logs().filter((line) => line.msg === "signers");
    expect(signersLines).toHaveLength(1);
    expect(signersLines[0]?.worker).toBeUndefined();
    // ES256 keys only: no worker needs OpenSSL.
    for (const pid of instance.pids.values()) expect(mapsLibcrypto(pid)).toBe(false);
    if (signersLines[0]?.RS256 !== "libcrypto") return; // no usable libcrypto here: nothing more to see
    await cli(server, "projects", "create", "--slug", "rsa", "--signing-alg", "RS256");
    const apiKey = await cli(server, "apikeys", "create", "--project", "rsa", "--name", "rsa");
    // Every worker serves a project once its key ring is loaded.
    await seenByEveryWorker(server, "the RS256 project on every worker", "/v1/project", () => fresh(server, "/v1/project", { apiKey }), async (res) => res.status === 200);
    const created = await fresh(server, "/v1/providers", { method: "POST", apiKey, body: { name: "rsa" } });
    expect(created.status).toBe(201);
    const provider = (await created.json()) as { id: string };
    const added = await fresh(server, `/v1/providers/${provider.id}/clients`, { method: "POST", apiKey, body: { name: "c", audience: "https://rsa.test" } });
    expect(added.status).toBe(201);
    const client = (await added.json()) as { id: string };
    const alg = async (res: Response) => (res.status === 201 ? decodeProtectedHeader(((await res.json()) as { accessToken: string }).accessToken).alg : undefined);
    const send = () => fresh(server, `/v1/providers/${provider.id}/clients/${client.id}/tokens`, { method: "POST", apiKey });
    await seenByEveryWorker(server, "RS256 tokens from every worker", TOKENS, send, async (res) => (await alg(res)) === "RS256");
    for (const pid of instance.pids.values()) expect(mapsLibcrypto(pid)).toBe(true);
    expect(server.proc.logs().filter((line) => line.msg === "libcrypto cannot sign")).toHaveLength(0);
  }, 30_000);

  test("an API key revoked with the CLI is refused by every worker from the next request on", async () => {
    const instance = await startInstance();
    const { server } = instance;
    const created = JSON.parse(await cli(server, "apikeys", "create", "--name", "doomed", "--json")) as { id: string; key: string };
    const send = () => fresh(server, "/v1/providers", { apiKey: created.key });
    await seenByEveryWorker(server, "the key accepted everywhere", "/v1/providers", send, async (res) => res.status === 200);
    await cli(server, "apikeys", "revoke", created.id);
    await seenByEveryWorker(server, "the revoked key refused everywhere", "/v1/providers", send, async (res) => res.status === 401);
  }, 30_000);

  test("a signing key revoked with the CLI leaves every worker's JWKS and tokens from the next request on", async () => {
    const instance = await startInstance();
    const { server, apiKey } = instance;
    const { tokenPath } = await providerAndClient(instance);
    const { items } = JSON.parse(await cli(server, "keys", "list", "--json")) as { items: { kid: string; state: string }[] };
    const current = items.find((k) => k.state === "current")?.kid as string;
    const token = () => fresh(server, tokenPath, { method: "POST", apiKey });
    await seenByEveryWorker(server, "tokens signed with the current key", TOKENS, token, async (res) => (await kidOf(res)) === current);
    await cli(server, "keys", "revoke", current);
    await seenByEveryWorker(server, "tokens signed with another key", TOKENS, token, async (res) => {
      const kid = await kidOf(res);
      return kid !== undefined && kid !== current;
    });
    for (let i = 0; i < BATCH; i++) expect(await jwksKids(await fresh(server, "/.well-known/jwks"))).not.toContain(current);
  }, 30_000);

  test("every write through one worker is read back by the next request, whichever worker answers it", async () => {
    const instance = await startInstance();
    const { server, apiKey } = instance;
    const { providerId } = await providerAndClient(instance);
    const path = `/v1/providers/${providerId}`;
    const from = server.proc.stdout.length;
    for (let i = 0; i < 40; i++) {
      expect((await fresh(server, path, { method: "PATCH", apiKey, body: { name: `name-${i}` } })).status).toBe(200);
      const read = await fresh(server, path, { apiKey });
      expect({ i, name: ((await read.json()) as { name: string }).name }).toEqual({ i, name: `name-${i}` });
    }
    // Both workers took part, in both roles.
    const workers = await waitFor("the request log", () => {
      const lines = answeringWorkers(server, from, "/v1/providers/:providerId");
      return lines.length >= 80 ? new Set(lines) : undefined;
    });
    expect([...workers].sort()).toEqual([1, 2]);
    expect((await fresh(server, `${path}/clients?limit=100`, { apiKey })).status).toBe(200);
  }, 30_000);

  test("a signing key revoked through one worker is gone from every worker's JWKS and tokens at once", async () => {
    const instance = await startInstance();
    const { server, apiKey } = instance;
    const { tokenPath } = await providerAndClient(instance);
    const token = () => fresh(server, tokenPath, { method: "POST", apiKey });
    const current = (await kidOf(await token())) as string;
    // Every worker has signed with the key and served it, so each holds it in memory.
    await seenByEveryWorker(server, "tokens signed with the current key", TOKENS, token, async (res) => (await kidOf(res)) === current);
    const revoked = await fresh(server, `/v1/keys/${current}/revoke`, { method: "POST", apiKey });
    expect(revoked.status).toBe(200);
    // JWKS requests are not logged, so which worker answered is not known: as many as the token batches below.
    const kids = await Promise.all(Array.from({ length: BATCH * MAX_BATCHES }, async () => jwksKids(await fresh(server, "/.well-known/jwks"))));
    for (const list of kids) expect(list).not.toContain(current);
    await seenByEveryWorker(server, "no token signed with the revoked key", TOKENS, token, async (res) => {
      const kid = await kidOf(res);
      return kid !== undefined && kid !== current;
    });
  }, 30_000);

  test("a key rotation made with the CLI is used by every worker from the next request on", async () => {
    // Data whose next key has been published long enough for a manual rotation.
    const first = await startServer();
    const masterKey = first.env.TOKENMINT_MASTER_KEY as string;
    expect(await first.proc.stop()).toBe(0);
    const store = openLmdbStore(first.dataDir);
    const projectId = (await store.getMeta<string>("defaultProjectId")) as string;
    const set = (await store.getKeySet(projectId))!;
    const dayAgo = Date.now() - 86_400_000;
    // Only the keys' age changes: the scheduled rotation stays a day away.
    const backdated = { ...set, version: set.version + 1, keys: set.keys.map((k) => ({ ...k, createdAt: dayAgo })) };
    expect(await store.swapKeySet(backdated, set.version)).toBe(true);
    await store.close();

    const instance = await startInstance({ dataDir: first.dataDir, masterKey });
    const { server, apiKey } = instance;
    const { tokenPath } = await providerAndClient(instance);
    const next = set.keys.find((k) => k.state === "next")?.kid as string;
    await cli(server, "keys", "rotate");
    const token = () => fresh(server, tokenPath, { method: "POST", apiKey });
    await seenByEveryWorker(server, "tokens signed with the promoted key", TOKENS, token, async (res) => (await kidOf(res)) === next);
    expect(server.proc.logs().filter((line) => line.msg === "signing key rotated")).toHaveLength(0);
  }, 30_000);

  /** An instance with 2 workers and a metrics listener, after BATCH tokens that both workers answered. */
  async function tokensFromBothWorkers() {
    const instance = await startInstance({}, true);
    const { server, apiKey } = instance;
    const { tokenPath } = await providerAndClient(instance);
    const from = server.proc.stdout.length;
    for (let i = 0; i < BATCH; i++) expect((await fresh(server, tokenPath, { method: "POST", apiKey })).status).toBe(201);
    const workers = await waitFor("the request log", () => {
      const seen = answeringWorkers(server, from, TOKENS);
      return seen.length >= BATCH ? seen : undefined;
    });
    expect(new Set(workers).size).toBe(2);
    return instance;
  }

  test("the metrics listener counts the requests of every worker, also across a worker's restart", async () => {
    const instance = await tokensFromBothWorkers();
    const { server } = instance;
    const scrape = async () => (await fetch(`${instance.metricsUrl}/metrics`)).text();
    const issued = (text: string) => Number(/^tokenmint_tokens_issued_total\{alg="ES256"\} (\d+)$/m.exec(text)?.[1] ?? "0");
    const before = await scrape();
    expect(issued(before)).toBe(BATCH);
    expect(before).toContain(`tokenmint_http_requests_total{method="POST",route="${TOKENS}",status="201"} ${BATCH}\n`);
    expect(before).toContain("tokenmint_jwks_keys 2\n");
    // One sample per family: the processes' memory is added up, not listed.
    expect(before.match(/^tokenmint_process_resident_memory_bytes /gm)).toHaveLength(1);

    // A worker killed after the scrape: what it had counted stays in the totals.
    const victim = instance.pids.get(1) as number;
    process.kill(victim, "SIGKILL");
    await waitFor("worker 1 to be restarted", () => (workerPids(server).get(1) !== victim ? true : undefined), 10_000);
    expect(issued(await scrape())).toBeGreaterThanOrEqual(BATCH);
    expect(await server.proc.stop()).toBe(0);
  }, 30_000);

  test("a worker killed while a scrape waits for another is counted once in it, and the totals never go back", async () => {
    const instance = await tokensFromBothWorkers();
    const { server } = instance;
    const issued = (text: string) => Number(/^tokenmint_tokens_issued_total\{alg="ES256"\} (\d+)$/m.exec(text)?.[1] ?? "0");
    await Bun.sleep(METRICS_REPORT_MS * 2);
    // Worker 2 stopped: the scrape waits for it (up to a second) after worker 1 has answered.
    const [first, second] = [instance.pids.get(1) as number, instance.pids.get(2) as number];
    process.kill(second, "SIGSTOP");
    try {
      const scraping = fetch(`${instance.metricsUrl}/metrics`).then((res) => res.text());
      await Bun.sleep(300);
      process.kill(first, "SIGKILL");
      const during = issued(await scraping);
      expect(during).toBe(BATCH);
    } finally {
      process.kill(second, "SIGCONT");
    }
    await waitFor("worker 1 to be restarted", () => (workerPids(server).get(1) !== first ? true : undefined), 10_000);
    expect(issued(await (await fetch(`${instance.metricsUrl}/metrics`)).text())).toBe(BATCH);
    expect(await server.proc.stop()).toBe(0);
  }, 30_000);

  test("what a killed worker counted since the last scrape stays in the totals", async () => {
    const instance = await tokensFromBothWorkers();
    const { server } = instance;
    // No scrape in between: a worker reports its counts to the primary by itself, every second.
    await Bun.sleep(METRICS_REPORT_MS * 2);
    const victim = instance.pids.get(1) as number;
    process.kill(victim, "SIGKILL");
    await waitFor("worker 1 to be restarted", () => (workerPids(server).get(1) !== victim ? true : undefined), 10_000);
    const text = await (await fetch(`${instance.metricsUrl}/metrics`)).text();
    expect(text).toContain(`tokenmint_tokens_issued_total{alg="ES256"} ${BATCH}\n`);
    expect(await server.proc.stop()).toBe(0);
  }, 30_000);

  test("a killed worker is restarted and serves again; the restart is logged", async () => {
    const instance = await startInstance();
    const { server, apiKey } = instance;
    const victim = instance.pids.get(2) as number;
    process.kill(victim, "SIGKILL");
    const warning = await waitFor("the restart warning", () =>
      server.proc.logs().find((line) => line.msg === "worker exited unexpectedly; restarting" && line.worker === 2),
    );
    expect(warning.pid).toBe(victim);
    expect(warning.signal).toBe("SIGKILL");
    expect(warning.restartInMs).toBeGreaterThan(0);
    await expectReplaced(server, 2, victim);
    await seenByEveryWorker(server, "both workers to answer", "/v1/providers", () => fresh(server, "/v1/providers", { apiKey }), async (res) => res.status === 200);
    expect(await server.proc.stop()).toBe(0);
    for (const pid of workerPids(server).values()) expect(isAlive(pid)).toBe(false);
  }, 30_000);

  test("a worker that stops answering its primary (SIGSTOP) is killed and restarted, and that is logged; an idle one is not", async () => {
    const instance = await startInstance();
    const { server, apiKey } = instance;
    const victim = instance.pids.get(1) as number;
    const idle = instance.pids.get(2) as number;
    process.kill(victim, "SIGSTOP");
    const killed = await waitFor(
      "the hung worker to be killed",
      () => server.proc.logs().find((line) => line.msg === "worker stopped answering; killing it to restart it"),
      WORKER_SILENCE_LIMIT_MS + 5_000,
    );
    expect(killed).toMatchObject({ level: "error", worker: 1, pid: victim });
    expect(killed.silentSeconds).toBeGreaterThanOrEqual(WORKER_SILENCE_LIMIT_MS / 1000);
    await expectReplaced(server, 1, victim);
    // Worker 2, idle all along, told its primary it was alive: it was not taken for hung.
    expect(server.proc.logs().filter((line) => line.msg === "worker stopped answering; killing it to restart it").map((line) => line.worker)).toEqual([1]);
    expect(workerPids(server).get(2)).toBe(idle);
    await seenByEveryWorker(server, "both workers to answer", "/v1/providers", () => fresh(server, "/v1/providers", { apiKey }), async (res) => res.status === 200);
    expect(await server.proc.stop()).toBe(0);
  }, 40_000);

  test("a primary paused for longer than the silence limit kills no worker when it resumes", async () => {
    const instance = await startInstance();
    const { server, apiKey } = instance;
    const before = new Map(workerPids(server));
    process.kill(server.proc.pid, "SIGSTOP");
    try {
      await Bun.sleep(WORKER_SILENCE_LIMIT_MS + 2 * METRICS_REPORT_MS);
    } finally {
      process.kill(server.proc.pid, "SIGCONT");
    }
    // A few of its ticks after it resumed.
    await Bun.sleep(3 * METRICS_REPORT_MS);
    expect(server.proc.logs().filter((line) => line.msg === "worker stopped answering; killing it to restart it")).toEqual([]);
    expect(workerPids(server)).toEqual(before);
    for (const pid of before.values()) expect(isAlive(pid)).toBe(true);
    await seenByEveryWorker(server, "both workers to answer", "/v1/providers", () => fresh(server, "/v1/providers", { apiKey }), async (res) => res.status === 200);
    expect(await server.proc.stop()).toBe(0);
  }, 40_000);

  test("workers stop by themselves when the primary is killed", async () => {
    const instance = await startInstance();
    const { server } = instance;
    server.proc.signal("SIGKILL");
    await server.proc.exited;
    for (const pid of instance.pids.values()) await waitFor(`worker ${pid} to exit`, () => (isAlive(pid) ? undefined : true), 10_000);
    // The port is free again.
    const probe = Bun.serve({ hostname: "127.0.0.1", port: server.port, fetch: () => new Response() });
    await probe.stop(true);
  }, 30_000);
});

/** Pids of the live processes whose environment names `dataDir` as their data directory. */
function processesOf(dataDir: string): number[] {
  const needle = `\0TOKENMINT_DATA_DIR=${dataDir}\0`;
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let environ: string;
    try {
      environ = `\0${readFileSync(`/proc/${entry}/environ`, "latin1")}`;
    } catch {
      continue;
    }
    if (environ.includes(needle) && isAlive(Number(entry))) pids.push(Number(entry));
  }
  return pids;
}

describe(`start-up with ${WORKERS} workers`, () => {
  test("a new data directory is initialised once, by the primary: one master key is generated, and every worker signs with the keys it sealed", async () => {
    const instance = await startInstance({ masterKey: null });
    const { server, apiKey } = instance;
    expect(existsSync(join(server.dataDir, "master.key"))).toBe(true);
    expect(processesOf(server.dataDir)).toHaveLength(1 + WORKERS);
    const generated = server.proc.logs().filter((line) => /master key generated/.test(String(line.msg)));
    expect(generated).toHaveLength(1);
    expect(generated[0]?.worker).toBeUndefined();
    const [kid] = await jwksKids(await fresh(server, "/.well-known/jwks"));
    const { tokenPath } = await providerAndClient(instance);
    await seenByEveryWorker(server, "a token signed with the published key", TOKENS, () => fresh(server, tokenPath, { method: "POST", apiKey, body: {} }), async (res) => (await kidOf(res)) === kid);
    expect(await server.proc.stop()).toBe(0);
  }, 30_000);

  test("a primary that refuses the data (a wrong master key) stops its workers with it: one line, exit 1, no worker left", async () => {
    const first = await startServer();
    expect(await first.proc.stop()).toBe(0);
    const env = { ...first.env, TOKENMINT_WORKERS: String(WORKERS), TOKENMINT_MASTER_KEY: newMasterKey(), TOKENMINT_PORT: String(await freePort()) };
    const result = await runTokenmint(["serve"], env, 8000);
    expect(result.code).toBe(1);
    expect(result.stderrLines).toHaveLength(1);
    expect(result.stderrLines[0]).toMatch(/does not match/);
    expect(processesOf(first.dataDir)).toEqual([]);
  }, 30_000);
});
