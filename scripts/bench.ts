/**
 * The benchmark: one command, one run, every figure beside its baseline on the same machine.
 *
 *   bun scripts/bench.ts [--binary dist/tokenmint] [--seconds 5] [--warmup 3] [--rounds 3]
 *                        [--connections 50] [--out bench-results.json]
 *                        [--no-peer] [--peer-version 9.13.3] [--peer-workers <cores>]
 *                        [--scale | --scale-only] [--scale-providers 100000] [--scale-clients 1000000] [--scale-alg ES256]
 *
 * For each signing algorithm it prepares a data directory with the executable's CLI (API key,
 * default project, signing keys) and measures the executable's start-up (start to first answer,
 * median of 5) and idle memory (with the executable read from disk: see measureStartups), alone
 * on the machine. Then it starts every server at once and checks each: tokenmint per algorithm
 * on loopback, with a provider, a client and a client secret, whose tokens from `POST .../tokens`
 * and `POST /oauth/token` must verify against the served JWKS, and the baselines below.
 *
 * It loads them in rounds (--rounds, 3 by default), each round every figure once and odd rounds
 * in reverse order, so the machine's drift over the run lands on both sides of each ratio; each
 * figure is the median of its rounds. A load is wrk for a fixed measured duration (after a
 * warm-up in the first round), with the server's CPU time and memory read from /proc (summed
 * over its process tree). Both token routes of each algorithm are loaded, and `.../tokens` also
 * at 80 % of the peak it reached in that round: wrk again, each connection pacing itself with a
 * wait before each request, tuned in short trials to the target rate. The RS256 instance also
 * serves the JWKS and discovery figures; the ES256 instance's `/oauth/token` is also loaded with
 * private_key_jwt: ES256 client assertions, each with its own jti, signed before each run
 * (scripts/bench/assertions.ts) and sent one per request.
 *
 * The baselines: the machine's signing rate with the service's signers on all cores and `openssl
 * speed` (all cores), measured in each round between the service's loads and the others; the
 * HTTP floor (a trivial Elysia server parsing the same JSON, in as many processes as the
 * service's workers, its GET answers as long as the JWKS and the discovery document, each
 * compared with its own); the ceiling that floor and signing leave (1 ÷ (1/floor +
 * 1/signing), the tokens/s if a token cost one floor request and one
 * signature and nothing more); the signing floor of each algorithm (the same floor answering
 * with a real token signed inline by the service's signer: the ceiling's work done for real, its
 * rate and its latency at 80 % of its peak, like the service's); and unless --no-peer the peer:
 * panva's oidc-provider under Node, installed from npm into a temp directory, issuing JWT access
 * tokens by client credentials with the same wrk settings as tokenmint's `/oauth/token` (a peer
 * token is verified against its JWKS first). After the rounds, the single-thread rate of every
 * signer the runtime offers (scripts/bench-signers.ts), for reference.
 *
 * --scale adds the scale variant: a data directory filled with 100,000 providers and 1,000,000
 * clients (scripts/bench/seed.ts, straight into LMDB, before the server starts), then issuance,
 * start-up and memory for --scale-alg next to an empty store's. The two are measured in turns:
 * both servers run at once and their token routes are loaded alternately, --rounds rounds (odd
 * ones in reverse), the median of each (`scale ...` and `empty ...` figures). --scale-only runs
 * the scale variant alone, without the main rounds, baselines and peer.
 *
 * Prints the machine (scripts/bench/machine.ts), every figure and ratio, and writes them as JSON.
 * Requires wrk (Debian: `apt-get install wrk`) and openssl; the peer needs node and npm (and the
 * npm registry).
 */
import { cpus, tmpdir } from "node:os";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { createRemoteJWKSet, importJWK, jwtVerify, type JWK } from "jose";
import { assertionBody, clientKeyPair, writeAssertionFiles } from "./bench/assertions.ts";
import { machineLine, thisMachine } from "./bench/machine.ts";
import { installPeer, PEER_CLIENT, startPeer, type PeerInstall } from "./bench/peer.ts";
import { haveWrk, runWrk, type LoadResult, type LoadSpec } from "./bench/wrk.ts";

const root = resolve(import.meta.dir, "..");
const { values } = parseArgs({
  options: {
    binary: { type: "string", default: join(root, "dist", "tokenmint") },
    seconds: { type: "string", default: "5" },
    rounds: { type: "string", default: "3" },
    warmup: { type: "string", default: "3" },
    connections: { type: "string", default: "50" },
    out: { type: "string", default: join(root, "bench-results.json") },
    "no-peer": { type: "boolean", default: false },
    "peer-version": { type: "string", default: "9.13.3" },
    "peer-workers": { type: "string", default: String(cpus().length) },
    scale: { type: "boolean", default: false },
    "scale-only": { type: "boolean", default: false },
    "scale-providers": { type: "string", default: "100000" },
    "scale-clients": { type: "string", default: "1000000" },
    "scale-alg": { type: "string", default: "ES256" },
  },
  strict: true,
});
const seconds = Number(values.seconds);
const warmup = Number(values.warmup);
const connections = Number(values.connections);
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds must be a whole number of at least 1");
const threads = 2;
const ALGS = ["RS256", "ES256", "EdDSA"] as const;
type Alg = (typeof ALGS)[number];
const scaleAlg = values["scale-alg"] as Alg;
if (!ALGS.includes(scaleAlg)) throw new Error(`--scale-alg must be one of ${ALGS.join(", ")}`);

if (!haveWrk()) {
  console.error("bench: wrk is required (Debian: apt-get install wrk)");
  process.exit(1);
}
const binary = resolve(values.binary as string);
if (!existsSync(binary)) {
  console.log(`bench: building ${binary}`);
  if (Bun.spawnSync([process.execPath, join(root, "scripts", "build.ts"), "--outfile", binary], { stdout: "inherit", stderr: "inherit" }).exitCode !== 0) process.exit(1);
}

async function freePort(): Promise<number> {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = probe.port as number;
  await probe.stop(true);
  return port;
}

async function waitReady(url: string, proc: { exitCode: number | null }, pollMs = 50): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`process exited with ${proc.exitCode}`);
    if (await fetch(url).then((r) => r.ok, () => false)) return;
    await Bun.sleep(pollMs);
  }
  throw new Error(`${url} did not answer within 15 s`);
}

/** `pid` and every descendant, from /proc (workers of a server count as the server). */
function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    const tasks = `/proc/${out[i]}/task`;
    if (!existsSync(tasks)) continue;
    for (const tid of readdirSync(tasks)) {
      const children = readFileSync(`${tasks}/${tid}/children`, "utf8").trim();
      if (children !== "") out.push(...children.split(" ").map(Number));
    }
  }
  return out;
}

/** The value in KiB of the field `name` of a /proc status or smaps_rollup text (0 if absent). */
const kibField = (text: string, name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(text)?.[1] ?? "0");

/** CPU seconds (user+system) and current/peak RSS, summed over the process tree of `pid`. */
function procUsage(pid: number): { cpuSeconds: number; rssMiB: number; peakRssMiB: number } {
  let ticks = 0;
  let rssKiB = 0;
  let peakKiB = 0;
  for (const p of processTree(pid)) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
      const status = readFileSync(`/proc/${p}/status`, "utf8");
      rssKiB += kibField(status, "VmRSS");
      peakKiB += kibField(status, "VmHWM");
    } catch {
      // The process ended between listing and reading.
    }
  }
  return { cpuSeconds: ticks / 100, rssMiB: rssKiB / 1024, peakRssMiB: peakKiB / 1024 };
}

/**
 * The largest process of the tree of `pid` (by RSS): its RSS, and its private pages, the ones no
 * other process maps (its own heap and written data), both in MB. The rest of its RSS is the
 * executable's and libraries' pages, which every process of the tree shares.
 */
function largestProcess(pid: number): { rssMB: number; privateMB: number } {
  let rssKiB = 0;
  let privateKiB = 0;
  for (const p of processTree(pid)) {
    try {
      const rollup = readFileSync(`/proc/${p}/smaps_rollup`, "utf8");
      if (kibField(rollup, "Rss") <= rssKiB) continue;
      rssKiB = kibField(rollup, "Rss");
      privateKiB = kibField(rollup, "Private_Clean") + kibField(rollup, "Private_Dirty");
    } catch {
      // The process ended between listing and reading.
    }
  }
  return { rssMB: (rssKiB * 1024) / 1e6, privateMB: (privateKiB * 1024) / 1e6 };
}

interface Measured extends LoadResult {
  serverCpuCores?: number;
  serverRssMiB?: number;
  serverPeakRssMiB?: number;
}

async function measure(pid: number | undefined, spec: Omit<LoadSpec, "connections" | "threads" | "seconds">): Promise<Measured> {
  const full = { ...spec, connections, threads, seconds };
  await runWrk({ ...full, seconds: warmup });
  return measured(pid, full);
}

/** One measured run of `spec`, with the server's CPU and memory over it. */
async function measured(pid: number | undefined, spec: LoadSpec): Promise<Measured> {
  const before = pid === undefined ? undefined : procUsage(pid);
  const result: Measured = await runWrk(spec);
  if (pid !== undefined && before !== undefined) {
    const after = procUsage(pid);
    result.serverCpuCores = (after.cpuSeconds - before.cpuSeconds) / spec.seconds;
    result.serverRssMiB = after.rssMiB;
    result.serverPeakRssMiB = after.peakRssMiB;
  }
  return result;
}

/** The share of the peak rate the paced latency figures are taken at. */
const PACED_SHARE = 0.8;
/** How far from the target rate a measured paced run may land before it is run again, and how often. */
const PACED_RETRY_MISS = 0.05;
const PACED_RETRIES = 2;

interface Paced extends Measured {
  /** The rate aimed at: PACED_SHARE of the peak. */
  targetPerSecond: number;
  /** The mean wait before each request that came closest to it. */
  delayMs: number;
}

/**
 * Latency at PACED_SHARE of `peak` req/s, with the same generator and connections: each
 * connection waits before each request. A connection's cycle is its wait plus the rest (latency
 * and the generator's own time), and rate = connections ÷ cycle, so the rate falls as the wait
 * grows. Short trial runs search the wait, from `firstDelayMs` (the wait an earlier round settled
 * on) or half a cycle: each reads the rest off its measured rate and tries the
 * wait that makes the cycle fit the target, or halves the bracket the trials so far have set
 * when that guess falls outside it. They stop within 3 % of the target; then one measured run
 * with the wait that came closest, run again (at most twice) with a corrected wait while it lands
 * more than 5 % away from the target.
 */
async function measurePaced(pid: number, spec: Omit<LoadSpec, "connections" | "threads" | "seconds">, peak: number, firstDelayMs?: number): Promise<Paced> {
  const target = peak * PACED_SHARE;
  const cycleMs = (connections / target) * 1000;
  // The rate is above the target with no wait and below it with a whole cycle's wait.
  let low = 0;
  let high = cycleMs;
  let delayMs = firstDelayMs !== undefined && firstDelayMs > 0 && firstDelayMs < cycleMs ? firstDelayMs : cycleMs / 2;
  let best = { delayMs, miss: Number.POSITIVE_INFINITY };
  for (let trial = 0; trial < 8; trial++) {
    const run = await runWrk({ ...spec, connections, threads, seconds: Math.min(3, seconds), delayMs });
    const miss = Math.abs(run.perSecond / target - 1);
    if (miss < best.miss) best = { delayMs, miss };
    if (miss < 0.03) break;
    if (run.perSecond > target) low = delayMs;
    else high = delayMs;
    const guess = cycleMs - ((connections / run.perSecond) * 1000 - delayMs);
    delayMs = guess > low && guess < high ? guess : (low + high) / 2;
  }
  // The measured run is longer than the trials and can land elsewhere; off by more than
  // PACED_RETRY_MISS, its own rate corrects the wait and it runs again (the closest run counts).
  let delay = best.delayMs;
  let result = await measured(pid, { ...spec, connections, threads, seconds, delayMs: delay });
  for (let retry = 0; retry < PACED_RETRIES && Math.abs(result.perSecond / target - 1) > PACED_RETRY_MISS; retry++) {
    const guess = cycleMs - ((connections / result.perSecond) * 1000 - delay);
    delay = guess > 0 ? guess : delay / 2;
    const again = await measured(pid, { ...spec, connections, threads, seconds, delayMs: delay });
    if (Math.abs(again.perSecond / target - 1) < Math.abs(result.perSecond / target - 1)) {
      result = again;
      best.delayMs = delay;
    }
  }
  return { ...result, targetPerSecond: target, delayMs: Math.round(best.delayMs * 1000) / 1000 };
}

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`;
const FORM = "application/x-www-form-urlencoded";
const GRANT = "grant_type=client_credentials";

/**
 * The environment of a tokenmint process of the bench: the default log level, so every management
 * request writes its log line, as it does in service (to /dev/null here).
 */
function serverEnv(port: number, alg: Alg): Record<string, string> {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", TOKENMINT_PORT: String(port), TOKENMINT_PUBLIC_URL: `http://127.0.0.1:${port}`, TOKENMINT_SIGNING_ALG: alg };
}

/** A data directory with the default project, signing keys and an API key (from the CLI). */
function prepareDataDir(alg: Alg): { dir: string; apiKey: string } {
  const dir = mkdtempSync(join(tmpdir(), "tokenmint-bench-"));
  const cli = Bun.spawnSync([binary, "apikeys", "create", "--name", "bench"], { cwd: dir, env: serverEnv(1, alg), stderr: "pipe" });
  if (cli.exitCode !== 0) throw new Error(`apikeys create failed: ${cli.stderr.toString()}`);
  return { dir, apiKey: cli.stdout.toString().trim() };
}

interface StartupFigures {
  /** Median ms from spawn to the first 200 of /readyz, over STARTS starts of existing data. */
  startMs: number;
  /** RSS (all processes) half a second after the first answer, MiB; the largest over the starts. */
  idleRssMiB: number;
  /** RSS of the largest single process (a worker) at that moment, in MB (10^6 bytes, the target's unit); the largest over the starts. */
  idleRssLargestProcessMB: number;
  /** The private pages of that largest process, in MB; the largest over the starts. */
  idleLargestProcessPrivateMB: number;
}

/** Starts per data directory for the start-up figures. */
const STARTS = 5;

/**
 * Writes the executable back to disk and drops it from the page cache (GNU dd's `nocache`), so the
 * next start reads it from disk, as a service started at boot does. The pages of a file just
 * written (a fresh build or copy) are mapped more widely: each process of such an executable held
 * about 5 MB more of it on the machine of the README's figures, until those pages left the cache.
 * An executable the bench may not write is only dropped from the cache as far as it is on disk.
 */
function readFromDiskNextStart(file: string): void {
  const dd = (...args: string[]) => Bun.spawnSync(["dd", ...args, "count=0"], { stdout: "ignore", stderr: "pipe" });
  if (dd(`of=${file}`, "oflag=nocache", "conv=notrunc,fdatasync").exitCode === 0) return;
  const readOnly = dd(`if=${file}`, "iflag=nocache");
  if (readOnly.exitCode !== 0) console.warn(`bench: could not drop ${file} from the page cache (${readOnly.stderr.toString().trim()}); idle memory is measured as the cache holds it`);
}

/**
 * Starts the executable STARTS times on each of `dirs` and measures start-up and idle memory,
 * the executable read from disk by the first start. The directories take turns, so figures
 * compared with each other share the machine's moments.
 */
async function measureStartups(dirs: readonly string[], alg: Alg): Promise<StartupFigures[]> {
  readFromDiskNextStart(binary);
  const times = dirs.map(() => [] as number[]);
  const idle = dirs.map(() => 0);
  const largest = dirs.map(() => 0);
  const privateMB = dirs.map(() => 0);
  for (let i = 0; i < STARTS; i++) {
    for (const [d, dir] of dirs.entries()) {
      const port = await freePort();
      const started = performance.now();
      const server = Bun.spawn([binary, "serve"], { cwd: dir, env: serverEnv(port, alg), stdout: "ignore", stderr: "inherit" });
      try {
        await waitReady(`http://127.0.0.1:${port}/readyz`, server, 2);
        (times[d] as number[]).push(performance.now() - started);
        await Bun.sleep(500);
        idle[d] = Math.max(idle[d] as number, procUsage(server.pid).rssMiB);
        const worker = largestProcess(server.pid);
        largest[d] = Math.max(largest[d] as number, worker.rssMB);
        privateMB[d] = Math.max(privateMB[d] as number, worker.privateMB);
      } finally {
        server.kill("SIGTERM");
        await server.exited;
      }
    }
  }
  return dirs.map((_, d) => {
    const sorted = (times[d] as number[]).sort((a, b) => a - b);
    return {
      startMs: Math.round(sorted[Math.floor(STARTS / 2)] as number),
      idleRssMiB: Math.round((idle[d] as number) * 10) / 10,
      idleRssLargestProcessMB: Math.round((largest[d] as number) * 10) / 10,
      idleLargestProcessPrivateMB: Math.round((privateMB[d] as number) * 10) / 10,
    };
  });
}

/** A started tokenmint of the bench, checked and ready to load. */
interface BenchServer {
  pid: number;
  base: string;
  /** wrk specs of `POST .../tokens` and `POST /oauth/token`. */
  tokens: Omit<LoadSpec, "connections" | "threads" | "seconds">;
  oauth: Omit<LoadSpec, "connections" | "threads" | "seconds">;
  /** `POST /oauth/token` by private_key_jwt (PRIVATE_KEY_JWT_ALG's server only): the spec of a run with fresh assertions. */
  privateKeyJwt?: (seconds: number, previousRate: number | undefined) => Omit<LoadSpec, "connections" | "threads" | "seconds">;
  /** The lengths of the JWKS and the discovery document served: the floor answers GETs of each. */
  getBytes: { jwks: number; discovery: number };
  stop(): Promise<void>;
}

/** The server whose `/oauth/token` is also loaded with private_key_jwt (ES256 client assertions). */
const PRIVATE_KEY_JWT_ALG: Alg = "ES256";
/** The rate the first private_key_jwt run gets assertions for; later runs get twice the previous run's. */
const PRIVATE_KEY_JWT_FIRST_RATE = 40_000;

/**
 * Starts the executable on a prepared data directory, creates a provider, a client and a client
 * secret, and checks that tokens from `POST .../tokens` and from `POST /oauth/token` verify
 * against the served JWKS. On PRIVATE_KEY_JWT_ALG's server the client also registers a public
 * key, and a token for one of its assertions must verify too.
 */
async function startServer(alg: Alg, dir: string, apiKey: string): Promise<BenchServer> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = Bun.spawn([binary, "serve"], { cwd: dir, env: serverEnv(port, alg), stdout: "ignore", stderr: "inherit" });
  const assertionsDir = alg === PRIVATE_KEY_JWT_ALG ? mkdtempSync(join(tmpdir(), "tokenmint-bench-assertions-")) : undefined;
  const stop = async () => {
    server.kill("SIGTERM");
    await server.exited;
    if (assertionsDir !== undefined) rmSync(assertionsDir, { recursive: true, force: true });
  };
  try {
    await waitReady(`${base}/readyz`, server);
    const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
    const post = async (path: string, body: unknown) => (await (await fetch(`${base}${path}`, { method: "POST", headers, body: JSON.stringify(body) })).json()) as Record<string, string>;
    const provider = await post("/v1/providers", { name: "bench" });
    const client = await post(`/v1/providers/${provider.id}/clients`, { name: "bench", audience: "https://bench.example" });
    const secret = await post(`/v1/providers/${provider.id}/clients/${client.id}/secrets`, {});
    const path = `/v1/providers/${provider.id}/clients/${client.id}/tokens`;
    const jwks = createRemoteJWKSet(new URL(`${base}/.well-known/jwks`));
    const expected = { issuer: base, audience: "https://bench.example" };
    await jwtVerify((await post(path, { expiresIn: 600 })).accessToken as string, jwks, expected);
    const oauthHeaders = { authorization: basic(client.id as string, secret.secret as string), "content-type": FORM };
    const oauth = (await (await fetch(`${base}/oauth/token`, { method: "POST", headers: oauthHeaders, body: GRANT })).json()) as { access_token: string };
    await jwtVerify(oauth.access_token, jwks, expected);
    let privateKeyJwt: BenchServer["privateKeyJwt"];
    if (assertionsDir !== undefined) {
      const key = clientKeyPair();
      const clientPath = `/v1/providers/${provider.id}/clients/${client.id}/jwks`;
      const registered = await fetch(`${base}${clientPath}`, { method: "PUT", headers, body: JSON.stringify({ keys: [key.publicJwk] }) });
      if (registered.status !== 200) throw new Error(`PUT .../jwks answered ${registered.status}: ${await registered.text()}`);
      const endpoint = `${base}/oauth/token`;
      const body = assertionBody(key.privateKey, client.id as string, endpoint, crypto.randomUUID());
      const answer = (await (await fetch(endpoint, { method: "POST", headers: { "content-type": FORM }, body })).json()) as { access_token: string };
      await jwtVerify(answer.access_token, jwks, expected);
      privateKeyJwt = (runSeconds, previousRate) => {
        const rate = previousRate === undefined ? PRIVATE_KEY_JWT_FIRST_RATE : previousRate * 2;
        const perThread = Math.ceil((rate * runSeconds) / threads) + 1000;
        const bodyFiles = writeAssertionFiles(assertionsDir, key.privateKey, client.id as string, endpoint, threads, perThread);
        return { url: endpoint, method: "POST", headers: { "content-type": FORM }, bodyFiles };
      };
    }
    const bytesOf = async (path: string) => (await (await fetch(`${base}${path}`)).arrayBuffer()).byteLength;
    const getBytes = { jwks: await bytesOf("/.well-known/jwks"), discovery: await bytesOf("/.well-known/openid-configuration") };
    return {
      pid: server.pid,
      base,
      tokens: { url: `${base}${path}`, method: "POST", body: JSON.stringify({ expiresIn: 600 }), headers },
      oauth: { url: `${base}/oauth/token`, method: "POST", body: GRANT, headers: oauthHeaders },
      privateKeyJwt,
      getBytes,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Something the rounds load: one figure's wrk spec, on a running server. */
interface Load {
  name: string;
  /** The server's process, whose tree's CPU and memory are read. */
  pid: number;
  spec: Omit<LoadSpec, "connections" | "threads" | "seconds">;
  /** Also measured at PACED_SHARE of the peak it reached in the same round. */
  paced?: boolean;
  /** The spec of each run, made for it (single-use bodies): for a run of `seconds`, after one at `previousRate`. */
  prepare?: (seconds: number, previousRate: number | undefined) => Omit<LoadSpec, "connections" | "threads" | "seconds">;
}

/** A spawned process of the bench, stopped with SIGTERM. */
async function stopProcess(proc: { kill(signal?: NodeJS.Signals): void; exited: Promise<number> }): Promise<void> {
  proc.kill("SIGTERM");
  await proc.exited;
}

/**
 * The loads of a started tokenmint: both token routes (`.../tokens` paced too); for RS256 also the
 * JWKS and discovery; for PRIVATE_KEY_JWT_ALG also `/oauth/token` by private_key_jwt.
 */
function serverLoads(alg: Alg, server: BenchServer): Load[] {
  const loads: Load[] = [
    { name: `tokens ${alg}`, pid: server.pid, spec: server.tokens, paced: true },
    { name: `tokens ${alg} oauth`, pid: server.pid, spec: server.oauth },
  ];
  if (server.privateKeyJwt !== undefined) {
    loads.push({ name: `tokens ${alg} private_key_jwt`, pid: server.pid, spec: server.oauth, prepare: server.privateKeyJwt });
  }
  if (alg === "RS256") {
    loads.push({ name: "jwks", pid: server.pid, spec: { url: `${server.base}/.well-known/jwks` } });
    loads.push({ name: "discovery", pid: server.pid, spec: { url: `${server.base}/.well-known/openid-configuration` } });
  }
  return loads;
}

/** The floors' POST: the token route's body and headers, at a floor listening on `base`. */
const floorPostSpec = (base: string) => ({
  url: `${base}/tokens`,
  method: "POST" as const,
  body: JSON.stringify({ expiresIn: 600 }),
  headers: { authorization: "Bearer floor-floor-floor-floor-floor-floor", "content-type": "application/json" },
});

/** Starts scripts/bench/floor.ts with `args` after the port, in as many processes as the service's default workers (one per core). */
async function startFloorProcess(args: string[], readyPath: string) {
  const port = await freePort();
  const proc = Bun.spawn([process.execPath, join(root, "scripts", "bench", "floor.ts"), String(port), String(cpus().length), ...args], { stdout: "ignore", stderr: "inherit" });
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitReady(`${base}${readyPath}`, proc);
  } catch (error) {
    await stopProcess(proc);
    throw error;
  }
  return { proc, base };
}

/** The HTTP floor, its GET answers as long as the JWKS and the discovery document. */
async function startFloor(getBytes: { jwks: number; discovery: number }): Promise<{ loads: Load[]; stop: () => Promise<void> }> {
  const { proc, base } = await startFloorProcess([`${getBytes.jwks},${getBytes.discovery}`], "/jwks");
  return {
    loads: [
      { name: "floor POST", pid: proc.pid, spec: floorPostSpec(base) },
      { name: "floor GET", pid: proc.pid, spec: { url: `${base}/jwks` } },
      { name: "floor GET discovery", pid: proc.pid, spec: { url: `${base}/discovery` } },
    ],
    stop: () => stopProcess(proc),
  };
}

/**
 * The signing floor of `alg`: the floor's processes answering each POST with a real token signed
 * inline with the service's signer (scripts/bench/floor.ts). One of its tokens is verified against
 * its key first. Loaded like the service's token route, and paced at PACED_SHARE of its peak, so
 * both the rate and the tail an issuer doing nothing but HTTP and signing gets here stand beside
 * tokenmint's.
 */
async function startSigningFloor(alg: Alg): Promise<{ loads: Load[]; stop: () => Promise<void> }> {
  const { proc, base } = await startFloorProcess(["0", alg], "/key");
  try {
    const spec = floorPostSpec(base);
    const key = await importJWK((await (await fetch(`${base}/key`)).json()) as JWK);
    const token = ((await (await fetch(spec.url, { method: "POST", headers: spec.headers, body: spec.body })).json()) as { accessToken: string }).accessToken;
    const { protectedHeader } = await jwtVerify(token, key, { audience: "https://bench.example" });
    if (protectedHeader.alg !== alg) throw new Error(`the signing floor signed with ${protectedHeader.alg}, not ${alg}`);
    return { loads: [{ name: `floor+sign ${alg}`, pid: proc.pid, spec, paced: true }], stop: () => stopProcess(proc) };
  } catch (error) {
    await stopProcess(proc);
    throw error;
  }
}

/** Output of scripts/bench-signers.ts --json. */
interface SignerRun {
  libcrypto: { available: boolean; version?: string; reason?: string };
  results: Record<string, Record<string, { perSecond: number; cpuCores: number; perCpuSecond: number }>>;
}

function signerArgs(signerSeconds: number, only?: string): string[] {
  return [process.execPath, join(root, "scripts", "bench-signers.ts"), "--json", "--seconds", String(signerSeconds), ...(only === undefined ? [] : ["--signers", only])];
}

/** Every signer the runtime offers, one process alone on the machine. */
async function singleThreadSigners(): Promise<SignerRun> {
  const proc = Bun.spawn(signerArgs(Math.max(1, Math.min(3, seconds / 3))), { stdout: "pipe", stderr: "inherit" });
  return (await new Response(proc.stdout).json()) as SignerRun;
}

/** The machine's signing rate with the signers the service uses: one process per core, summed. */
async function allCoresSignRate(): Promise<Record<string, number>> {
  const procs = cpus().map(() => Bun.spawn(signerArgs(3, "node-sync,libcrypto"), { stdout: "pipe", stderr: "inherit" }));
  const outputs = await Promise.all(procs.map((p) => new Response(p.stdout).json() as Promise<SignerRun>));
  const total: Record<string, number> = {};
  for (const alg of ALGS) total[alg] = outputs.reduce((sum, o) => sum + Math.max(0, ...Object.values(o.results[alg] ?? {}).map((r) => r.perSecond)), 0);
  return total;
}

/** `openssl speed` signing rate on all cores. */
function opensslSignRate(): Record<string, number> {
  const out = Bun.spawnSync(["openssl", "speed", "-seconds", "3", "-multi", String(cpus().length), "rsa2048", "ecdsap256", "ed25519"], { stdout: "pipe", stderr: "ignore" }).stdout.toString();
  const pick = (re: RegExp) => Number(re.exec(out)?.[1] ?? "NaN");
  return {
    RS256: pick(/rsa 2048 bits\s+\S+\s+\S+\s+([\d.]+)/),
    ES256: pick(/ecdsa \(nistp256\)\s+\S+\s+\S+\s+([\d.]+)/),
    EdDSA: pick(/EdDSA \(Ed25519\)\s+\S+\s+\S+\s+([\d.]+)/),
  };
}

/** The peer for `alg`, started and checked: one of its tokens verifies against its JWKS. */
async function startPeerServer(install: PeerInstall, alg: Alg): Promise<{ loads: Load[]; stop: () => Promise<void> }> {
  const headers = { authorization: basic(PEER_CLIENT.id, PEER_CLIENT.secret), "content-type": FORM };
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const peer = await startPeer(install, port, alg, Number(values["peer-workers"]));
  try {
    const discovery = (await (await fetch(`${base}/.well-known/openid-configuration`)).json()) as { token_endpoint: string; jwks_uri: string };
    const answer = (await (await fetch(discovery.token_endpoint, { method: "POST", headers, body: GRANT })).json()) as { access_token?: string; error?: string };
    if (answer.access_token === undefined) throw new Error(`the peer issued no token: ${JSON.stringify(answer)}`);
    const { protectedHeader } = await jwtVerify(answer.access_token, createRemoteJWKSet(new URL(discovery.jwks_uri)), { issuer: base, audience: PEER_CLIENT.audience });
    if (protectedHeader.alg !== alg) throw new Error(`the peer signed with ${protectedHeader.alg}, not ${alg}`);
    return { loads: [{ name: `peer ${alg}`, pid: peer.pid, spec: { url: discovery.token_endpoint, method: "POST", body: GRANT, headers } }], stop: () => stopProcess(peer) };
  } catch (error) {
    await stopProcess(peer);
    throw error;
  }
}

/** The median of `runs` by `key` (of an even number, the higher of the middle two). */
function medianBy<T>(runs: readonly T[], key: (run: T) => number): T {
  return [...runs].sort((a, b) => key(a) - key(b))[Math.floor(runs.length / 2)] as T;
}

/** The median of each figure over rounds, by requests per second. */
const medianRun = (runs: readonly Measured[]): Measured => medianBy(runs, (run) => run.perSecond);

/**
 * The scale variant: many providers and clients in the store, then the issuance, start-up and
 * memory figures next to an empty store's. Both servers run at once and are loaded in turns
 * (--rounds rounds, the median of each), and start-up is measured in turns too, so the
 * machine's drift lands on both sides of each ratio.
 */
async function benchScale(): Promise<{ startup: StartupFigures; emptyStartup: StartupFigures; seed: unknown }> {
  const seeded = prepareDataDir(scaleAlg);
  const empty = prepareDataDir(scaleAlg);
  try {
    console.log(`bench: seeding ${values["scale-providers"]} providers and ${values["scale-clients"]} clients`);
    const seeding = Bun.spawnSync([process.execPath, join(root, "scripts", "bench", "seed.ts"), join(seeded.dir, "data"), values["scale-providers"] as string, values["scale-clients"] as string], {
      stdout: "pipe",
      stderr: "inherit",
    });
    if (seeding.exitCode !== 0) throw new Error("seeding failed");
    const seed = JSON.parse(seeding.stdout.toString().trim()) as unknown;
    const [startup, emptyStartup] = (await measureStartups([seeded.dir, empty.dir], scaleAlg)) as [StartupFigures, StartupFigures];
    const servers = { scale: await startServer(scaleAlg, seeded.dir, seeded.apiKey) } as Record<"scale" | "empty", BenchServer>;
    try {
      servers.empty = await startServer(scaleAlg, empty.dir, empty.apiKey);
      const steps = (["tokens", "oauth"] as const).flatMap((route) =>
        (["scale", "empty"] as const).map((side) => async () => {
          const server = servers[side];
          (runs[`${side} tokens ${scaleAlg}${route === "oauth" ? " oauth" : ""}`] ??= []).push(await measure(server.pid, server[route]));
        }),
      );
      // Odd rounds in reverse, as in the main rounds: neither store is always loaded first.
      for (let round = 0; round < rounds; round++) {
        console.log(`bench: scale round ${round + 1} of ${rounds}`);
        for (const step of round % 2 === 0 ? steps : [...steps].reverse()) await step();
      }
      return { startup, emptyStartup, seed };
    } finally {
      await Promise.all(Object.values(servers).map((server) => server.stop()));
    }
  } finally {
    rmSync(seeded.dir, { recursive: true, force: true });
    rmSync(empty.dir, { recursive: true, force: true });
  }
}

const startup: Record<string, StartupFigures> = {};
// Set by benchRounds, which the compiler does not follow: the cast keeps both forms.
let peer = { skipped: values["scale-only"] ? "--scale-only" : "--no-peer" } as { version: string; workers: number } | { skipped: string };
let getBytes = { jwks: 0, discovery: 0 };
const runs: Record<string, Measured[]> = {};
const pacedRuns: Record<string, Paced[]> = {};
const signingRuns: { runtime: Record<string, number>[]; openssl: Record<string, number>[] } = { runtime: [], openssl: [] };

/**
 * The run: start-up and idle memory of each algorithm first, alone on the machine; then every
 * server at once, loaded in rounds.
 */
async function benchRounds(): Promise<void> {
  const prepared = ALGS.map((alg) => ({ alg, ...prepareDataDir(alg) }));
  const stops: (() => Promise<void>)[] = [];
  let peerInstall: PeerInstall | undefined;
  try {
    for (const { alg, dir } of prepared) startup[alg] = ((await measureStartups([dir], alg)) as [StartupFigures])[0];
    const serverLoadList: Load[] = [];
    for (const { alg, dir, apiKey } of prepared) {
      const server = await startServer(alg, dir, apiKey);
      stops.push(server.stop);
      serverLoadList.push(...serverLoads(alg, server));
      if (alg === "RS256") getBytes = server.getBytes;
    }
    const baselineLoads: Load[] = [];
    for (const start of [() => startFloor(getBytes), ...ALGS.map((alg) => () => startSigningFloor(alg))]) {
      const started = await start();
      stops.push(started.stop);
      baselineLoads.push(...started.loads);
    }
    if (!values["no-peer"]) {
      const peerStops: (() => Promise<void>)[] = [];
      try {
        peerInstall = installPeer(values["peer-version"] as string);
        const peerLoads: Load[] = [];
        for (const alg of ALGS) {
          const started = await startPeerServer(peerInstall, alg);
          peerStops.push(started.stop);
          peerLoads.push(...started.loads);
        }
        baselineLoads.push(...peerLoads);
        stops.push(...peerStops);
        peer = { version: peerInstall.version, workers: Number(values["peer-workers"]) };
      } catch (error) {
        await Promise.all(peerStops.map((stop) => stop()));
        peer = { skipped: (error as Error).message };
        console.error(`bench: peer skipped: ${(error as Error).message}`);
      }
    }

    // One step per load, and one for the signing baselines between the service's loads and the
    // other baselines. Odd rounds take the steps in reverse, so no figure is always measured first.
    const loadStep = (load: Load) => async (round: number) => {
      const specFor = (runSeconds: number) => load.prepare?.(runSeconds, runs[load.name]?.at(-1)?.perSecond) ?? load.spec;
      if (round === 0 && warmup > 0) await runWrk({ ...specFor(warmup), connections, threads, seconds: warmup });
      const peak = await measured(load.pid, { ...specFor(seconds), connections, threads, seconds });
      (runs[load.name] ??= []).push(peak);
      if (load.paced) {
        const previous = pacedRuns[load.name]?.at(-1);
        (pacedRuns[load.name] ??= []).push(await measurePaced(load.pid, load.spec, peak.perSecond, previous?.delayMs));
      }
    };
    const steps = [
      ...serverLoadList.map(loadStep),
      async () => {
        signingRuns.runtime.push(await allCoresSignRate());
        signingRuns.openssl.push(opensslSignRate());
      },
      ...baselineLoads.map(loadStep),
    ];
    for (let round = 0; round < rounds; round++) {
      console.log(`bench: round ${round + 1} of ${rounds}`);
      for (const step of round % 2 === 0 ? steps : [...steps].reverse()) await step(round);
    }
  } finally {
    await Promise.all(stops.map((stop) => stop()));
    peerInstall?.remove();
    for (const { dir } of prepared) rmSync(dir, { recursive: true, force: true });
  }
}
if (!values["scale-only"]) await benchRounds();
let scale: { startup: StartupFigures; emptyStartup: StartupFigures; seed: unknown } | undefined;
if (values.scale || values["scale-only"]) scale = await benchScale();
/** Errors are counted over every round, not only in the run that stands for them. */
const withAllErrors = <T extends Measured>(run: T, all: readonly Measured[]): T => ({ ...run, errors: all.reduce((sum, m) => sum + m.errors, 0) });
const figures: Record<string, Measured> = Object.fromEntries(Object.entries(runs).map(([name, m]) => [name, withAllErrors(medianRun(m), m)]));
const paced: Record<string, Paced> = Object.fromEntries(Object.entries(pacedRuns).map(([name, m]) => [name, withAllErrors(medianBy(m, (run) => run.p99Ms), m)]));
/** The median over rounds of each algorithm's signing rate. */
const medianRates = (perRound: Record<string, number>[]) => Object.fromEntries(ALGS.map((alg) => [alg, medianBy(perRound.map((r) => r[alg] as number), (rate) => rate)]));
const runtime = medianRates(signingRuns.runtime);
const openssl = medianRates(signingRuns.openssl);
const signers = await singleThreadSigners();
const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || !b ? undefined : Math.round((a / b) * 1000) / 1000);
const ratios: Record<string, number | undefined> = {};
// The most tokens/s the machine could give if a token cost one floor request plus one signature
// and nothing else: each takes its share of the machine, 1/floor + 1/signing seconds per token.
const ceiling: Record<string, number> = {};
const floorPost = figures["floor POST"]?.perSecond;
for (const alg of ALGS) if (floorPost && runtime[alg]) ceiling[alg] = Math.round(1 / (1 / floorPost + 1 / (runtime[alg] as number)));
for (const alg of ALGS) {
  const tps = figures[`tokens ${alg}`]?.perSecond;
  ratios[`tokens ${alg} / ceiling`] = ratio(tps, ceiling[alg]);
  ratios[`ceiling ${alg} / HTTP floor`] = ratio(ceiling[alg], floorPost);
  ratios[`tokens ${alg} / openssl sign`] = ratio(tps, openssl[alg]);
  ratios[`tokens ${alg} / runtime sign`] = ratio(tps, runtime[alg]);
  ratios[`tokens ${alg} / HTTP floor`] = ratio(tps, figures["floor POST"]?.perSecond);
  ratios[`oauth ${alg} / peer`] = ratio(figures[`tokens ${alg} oauth`]?.perSecond, figures[`peer ${alg}`]?.perSecond);
  // The signing floor: what the service's own work costs, and what an issuer doing only HTTP and signing reaches against each target's baseline.
  const signingFloor = figures[`floor+sign ${alg}`]?.perSecond;
  ratios[`tokens ${alg} / floor+sign`] = ratio(tps, signingFloor);
  ratios[`oauth ${alg} / floor+sign`] = ratio(figures[`tokens ${alg} oauth`]?.perSecond, signingFloor);
  ratios[`floor+sign ${alg} / openssl sign`] = ratio(signingFloor, openssl[alg]);
  ratios[`floor+sign ${alg} / HTTP floor`] = ratio(signingFloor, floorPost);
  ratios[`floor+sign ${alg} / peer`] = ratio(signingFloor, figures[`peer ${alg}`]?.perSecond);
}
// What a client assertion costs beside a client secret: its signature verified, and its jti written.
ratios[`private_key_jwt ${PRIVATE_KEY_JWT_ALG} / oauth`] = ratio(figures[`tokens ${PRIVATE_KEY_JWT_ALG} private_key_jwt`]?.perSecond, figures[`tokens ${PRIVATE_KEY_JWT_ALG} oauth`]?.perSecond);
ratios["jwks / HTTP floor"] = ratio(figures.jwks?.perSecond, figures["floor GET"]?.perSecond);
ratios["discovery / HTTP floor"] = ratio(figures.discovery?.perSecond, figures["floor GET discovery"]?.perSecond);
if (scale !== undefined) {
  ratios[`scale tokens ${scaleAlg} / empty`] = ratio(figures[`scale tokens ${scaleAlg}`]?.perSecond, figures[`empty tokens ${scaleAlg}`]?.perSecond);
  ratios[`scale oauth ${scaleAlg} / empty`] = ratio(figures[`scale tokens ${scaleAlg} oauth`]?.perSecond, figures[`empty tokens ${scaleAlg} oauth`]?.perSecond);
  ratios[`scale start-up / empty`] = ratio(scale.startup.startMs, scale.emptyStartup.startMs);
  ratios[`scale idle RSS / empty`] = ratio(scale.startup.idleRssMiB, scale.emptyStartup.idleRssMiB);
}

const machine = thisMachine();
const fmt = (n: number | undefined, digits = 0) => (n === undefined || Number.isNaN(n) ? "-" : n.toFixed(digits));
/** The lowest and highest of a figure over the rounds. */
const spread = (values: readonly number[], digits = 0) => `${fmt(Math.min(...values), digits)}–${fmt(Math.max(...values), digits)}`;
console.log(
  `\nmachine: ${machineLine(machine)}; wrk ${threads} threads, ${connections} connections, ${seconds} s after ${warmup} s warm-up; ${rounds} round(s), the median of each figure, errors over all\n`,
);
console.log("figure                          req/s     p50 ms  p99 ms  max ms  errors  server cpu  rss MiB  req/s over rounds");
for (const [name, m] of Object.entries(figures)) {
  const all = runs[name];
  console.log(
    `${name.padEnd(30)} ${fmt(m.perSecond).padStart(7)}  ${fmt(m.p50Ms, 2).padStart(7)} ${fmt(m.p99Ms, 2).padStart(7)} ${fmt(m.maxMs, 1).padStart(7)} ${String(m.errors).padStart(7)}  ${fmt(m.serverCpuCores, 2).padStart(10)} ${fmt(m.serverRssMiB, 1).padStart(8)}  ${all === undefined ? "" : spread(all.map((r) => r.perSecond))}`,
  );
}
console.log(`\nlatency at ${PACED_SHARE * 100} % of the peak (each connection waits before each request)`);
console.log("of the peak of its own round; the run of the median p99 stands for the figure");
console.log("figure                      target  req/s  share  p50 ms  p99 ms  max ms  errors  server cpu  p99 ms over rounds");
for (const [name, m] of Object.entries(paced)) {
  const share = m.perSecond / (m.targetPerSecond / PACED_SHARE);
  console.log(
    `${name.padEnd(26)} ${fmt(m.targetPerSecond).padStart(7)} ${fmt(m.perSecond).padStart(6)}  ${fmt(share, 2).padStart(5)} ${fmt(m.p50Ms, 2).padStart(7)} ${fmt(m.p99Ms, 2).padStart(7)} ${fmt(m.maxMs, 1).padStart(7)} ${String(m.errors).padStart(7)}  ${fmt(m.serverCpuCores, 2).padStart(10)}  ${spread((pacedRuns[name] ?? []).map((r) => r.p99Ms), 1)}`,
  );
}
console.log(`\nstart-up (start to first answer, median of ${STARTS}) and idle RSS, the executable read from disk (all processes; the largest process; its private pages):`);
for (const [alg, s] of Object.entries(startup)) {
  console.log(
    `  ${alg.padEnd(22)} ${String(s.startMs).padStart(5)} ms  ${fmt(s.idleRssMiB, 1).padStart(6)} MiB  ${fmt(s.idleRssLargestProcessMB, 1).padStart(5)} MB  ${fmt(s.idleLargestProcessPrivateMB, 1).padStart(5)} MB private`,
  );
}
if (scale !== undefined) {
  console.log(`  ${`${scaleAlg} scale`.padEnd(22)} ${String(scale.startup.startMs).padStart(5)} ms  ${fmt(scale.startup.idleRssMiB, 1).padStart(6)} MiB  (seed: ${JSON.stringify(scale.seed)})`);
  console.log(`  ${`${scaleAlg} empty, in turns`.padEnd(22)} ${String(scale.emptyStartup.startMs).padStart(5)} ms  ${fmt(scale.emptyStartup.idleRssMiB, 1).padStart(6)} MiB`);
}
console.log(`\nsigners, one thread (sign/s; sign per CPU second)  libcrypto: ${signers.libcrypto.available ? signers.libcrypto.version : `unavailable (${signers.libcrypto.reason})`}`);
for (const [alg, row] of Object.entries(signers.results)) {
  console.log(`  ${alg.padEnd(6)} ${Object.entries(row).map(([kind, r]) => `${kind} ${r.perSecond} (${r.perCpuSecond}/cpu-s)`).join(", ")}`);
}
/** A signing rate's median and its spread over the rounds. */
const rateOverRounds = (median: Record<string, number>, perRound: Record<string, number>[]) => ALGS.map((a) => `${a} ${fmt(median[a])} (${spread(perRound.map((r) => r[a] as number))})`).join(", ");
if (signingRuns.runtime.length > 0) {
  console.log(`\nsigning/s (all cores; median, and over rounds)  service's signers: ${rateOverRounds(runtime, signingRuns.runtime)}`);
  console.log(`                                              openssl speed:     ${rateOverRounds(openssl, signingRuns.openssl)}`);
  console.log(`ceiling (floor + signing): ${ALGS.map((a) => `${a} ${fmt(ceiling[a])}`).join(", ")} tokens/s`);
}
console.log(`peer: ${"skipped" in peer ? `skipped (${peer.skipped})` : `oidc-provider ${peer.version} under Node ${Bun.spawnSync(["node", "--version"]).stdout.toString().trim()}, ${peer.workers} process(es)`}\n`);
// A ratio whose figures were not measured (the peer with --no-peer, all but scale with --scale-only) is left out.
for (const [name, value] of Object.entries(ratios)) if (value !== undefined) console.log(`${name.padEnd(32)} ${fmt(value, 3)}`);

const out = resolve(values.out as string);
writeFileSync(
  out,
  `${JSON.stringify({ machine, settings: { threads, connections, seconds, warmup, rounds, pacedShare: PACED_SHARE, floorProcesses: cpus().length, floorGetBytes: getBytes }, figures, paced, startup, scale, signers, signing: { runtime, openssl }, ceiling, peer, ratios, rounds: { perSecond: Object.fromEntries(Object.entries(runs).map(([name, m]) => [name, m.map((r) => Math.round(r.perSecond))])), pacedP99Ms: Object.fromEntries(Object.entries(pacedRuns).map(([name, m]) => [name, m.map((r) => r.p99Ms)])), signing: signingRuns } }, null, 2)}\n`,
);
console.log(`\nwrote ${out}`);
