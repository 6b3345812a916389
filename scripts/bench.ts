/**
 * The benchmark: one command, one run, every figure beside its baseline on the same machine.
 *
 *   bun scripts/bench.ts [--binary dist/tokenmint] [--seconds 10] [--warmup 3]
 *                        [--connections 50] [--out bench-results.json]
 *
 * For each signing algorithm it starts the executable on loopback in a temp directory, creates
 * an API key (with the executable's CLI), a provider and a client, checks that an issued token
 * verifies against the served JWKS, then loads `POST .../tokens` with wrk (warm-up, then a fixed
 * measured duration) and reads the server's CPU time and memory from /proc. The RS256 instance
 * also serves the JWKS and discovery figures. Baselines in the same run: the runtime's raw
 * signing rate, `openssl speed` (all cores), and the HTTP floor (a trivial Elysia server parsing
 * the same JSON, loaded by the same wrk settings). Prints a table and writes JSON.
 * Requires wrk (Debian: `apt-get install wrk`) and openssl.
 */
import { cpus } from "node:os";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { createRemoteJWKSet, jwtVerify } from "jose";
import { haveWrk, runWrk, type LoadResult } from "./bench/wrk.ts";

const root = resolve(import.meta.dir, "..");
const { values } = parseArgs({
  options: {
    binary: { type: "string", default: join(root, "dist", "tokenmint") },
    seconds: { type: "string", default: "10" },
    warmup: { type: "string", default: "3" },
    connections: { type: "string", default: "50" },
    out: { type: "string", default: join(root, "bench-results.json") },
  },
  strict: true,
});
const seconds = Number(values.seconds);
const warmup = Number(values.warmup);
const connections = Number(values.connections);
const threads = 2;
const ALGS = ["RS256", "ES256", "EdDSA"] as const;

if (!haveWrk()) {
  console.error("bench: wrk is required (Debian: apt-get install wrk)");
  process.exit(1);
}
const binary = resolve(values.binary as string);
if (!existsSync(binary)) {
  console.log(`bench: building ${binary}`);
  if (Bun.spawnSync(["bun", join(root, "scripts", "build.ts"), "--outfile", binary], { stdout: "inherit", stderr: "inherit" }).exitCode !== 0) process.exit(1);
}

async function freePort(): Promise<number> {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = probe.port as number;
  await probe.stop(true);
  return port;
}

async function waitReady(url: string, proc: { exitCode: number | null }): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`process exited with ${proc.exitCode}`);
    if (await fetch(url).then((r) => r.ok, () => false)) return;
    await Bun.sleep(50);
  }
  throw new Error(`${url} did not answer within 15 s`);
}

/** CPU seconds (user+system) and current/peak RSS of a process, from /proc. */
function procUsage(pid: number): { cpuSeconds: number; rssMiB: number; peakRssMiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? "0");
  return { cpuSeconds: ticks / 100, rssMiB: kib("VmRSS") / 1024, peakRssMiB: kib("VmHWM") / 1024 };
}

interface Measured extends LoadResult {
  serverCpuCores?: number;
  serverRssMiB?: number;
  serverPeakRssMiB?: number;
}

async function measure(pid: number | undefined, spec: Parameters<typeof runWrk>[0]): Promise<Measured> {
  await runWrk({ ...spec, seconds: warmup });
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

async function benchAlg(alg: (typeof ALGS)[number]): Promise<Record<string, Measured>> {
  const dir = mkdtempSync(join(tmpdir(), "tokenmint-bench-"));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", TOKENMINT_PORT: String(port), TOKENMINT_PUBLIC_URL: base, TOKENMINT_SIGNING_ALG: alg, TOKENMINT_LOG_LEVEL: "warn" };
  const server = Bun.spawn([binary, "serve"], { cwd: dir, env, stdout: "ignore", stderr: "inherit" });
  try {
    await waitReady(`${base}/readyz`, server);
    const cli = Bun.spawnSync([binary, "apikeys", "create", "--name", "bench"], { cwd: dir, env });
    const apiKey = cli.stdout.toString().trim();
    const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
    const post = async (path: string, body: unknown) => (await (await fetch(`${base}${path}`, { method: "POST", headers, body: JSON.stringify(body) })).json()) as Record<string, string>;
    const provider = await post("/v1/providers", { name: "bench" });
    const client = await post(`/v1/providers/${provider.id}/clients`, { name: "bench", audience: "https://bench.example" });
    const path = `/v1/providers/${provider.id}/clients/${client.id}/tokens`;
    const body = JSON.stringify({ expiresIn: 600 });
    const token = await post(path, { expiresIn: 600 });
    await jwtVerify(token.accessToken as string, createRemoteJWKSet(new URL(`${base}/.well-known/jwks`)), { issuer: base, audience: "https://bench.example" });

    const figures: Record<string, Measured> = {};
    figures[`tokens ${alg}`] = await measure(server.pid, { url: `${base}${path}`, method: "POST", body, headers, connections, threads, seconds });
    if (alg === "RS256") {
      figures.jwks = await measure(server.pid, { url: `${base}/.well-known/jwks`, connections, threads, seconds });
      figures.discovery = await measure(server.pid, { url: `${base}/.well-known/openid-configuration`, connections, threads, seconds });
    }
    return figures;
  } finally {
    server.kill("SIGTERM");
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchFloor(): Promise<Record<string, Measured>> {
  const port = await freePort();
  const server = Bun.spawn(["bun", join(root, "scripts", "bench", "floor.ts"), String(port)], { stdout: "ignore", stderr: "inherit" });
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitReady(`${base}/jwks`, server);
    const headers = { authorization: "Bearer floor-floor-floor-floor-floor-floor", "content-type": "application/json" };
    return {
      "floor POST": await measure(server.pid, { url: `${base}/tokens`, method: "POST", body: JSON.stringify({ expiresIn: 600 }), headers, connections, threads, seconds }),
      "floor GET": await measure(server.pid, { url: `${base}/jwks`, connections, threads, seconds }),
    };
  } finally {
    server.kill("SIGTERM");
    await server.exited;
  }
}

/** Runtime signing rate: one sign-rate process per core, summed. */
async function runtimeSignRate(): Promise<Record<string, number>> {
  const procs = cpus().map(() => Bun.spawn(["bun", join(root, "scripts", "bench", "sign-rate.ts"), "3"], { stdout: "pipe", stderr: "inherit" }));
  const outputs = await Promise.all(procs.map((p) => new Response(p.stdout).json() as Promise<Record<string, { webcrypto: number; nodeSync: number }>>));
  const total: Record<string, number> = {};
  for (const alg of ALGS) total[alg] = outputs.reduce((sum, o) => sum + Math.max(o[alg]?.webcrypto ?? 0, o[alg]?.nodeSync ?? 0), 0);
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

const figures: Record<string, Measured> = {};
for (const alg of ALGS) Object.assign(figures, await benchAlg(alg));
Object.assign(figures, await benchFloor());
const runtime = await runtimeSignRate();
const openssl = opensslSignRate();

const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || !b ? undefined : Math.round((a / b) * 1000) / 1000);
const ratios: Record<string, number | undefined> = {};
for (const alg of ALGS) {
  const tps = figures[`tokens ${alg}`]?.perSecond;
  ratios[`tokens ${alg} / openssl sign`] = ratio(tps, openssl[alg]);
  ratios[`tokens ${alg} / runtime sign`] = ratio(tps, runtime[alg]);
  ratios[`tokens ${alg} / HTTP floor`] = ratio(tps, figures["floor POST"]?.perSecond);
}
ratios["jwks / HTTP floor"] = ratio(figures.jwks?.perSecond, figures["floor GET"]?.perSecond);
ratios["discovery / HTTP floor"] = ratio(figures.discovery?.perSecond, figures["floor GET"]?.perSecond);

const fmt = (n: number | undefined, digits = 0) => (n === undefined || Number.isNaN(n) ? "-" : n.toFixed(digits));
console.log(`\nmachine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}; wrk ${threads} threads, ${connections} connections, ${seconds} s after ${warmup} s warm-up\n`);
console.log("figure              req/s     p50 ms  p99 ms  max ms  errors  server cpu  rss MiB");
for (const [name, m] of Object.entries(figures)) {
  console.log(
    `${name.padEnd(18)} ${fmt(m.perSecond).padStart(7)}  ${fmt(m.p50Ms, 2).padStart(7)} ${fmt(m.p99Ms, 2).padStart(7)} ${fmt(m.maxMs, 1).padStart(7)} ${String(m.errors).padStart(7)}  ${fmt(m.serverCpuCores, 2).padStart(10)} ${fmt(m.serverRssMiB, 1).padStart(8)}`,
  );
}
console.log(`\nsigning/s (all cores)  runtime: ${ALGS.map((a) => `${a} ${fmt(runtime[a])}`).join(", ")}`);
console.log(`                       openssl: ${ALGS.map((a) => `${a} ${fmt(openssl[a])}`).join(", ")}\n`);
for (const [name, value] of Object.entries(ratios)) console.log(`${name.padEnd(30)} ${fmt(value, 3)}`);

const out = resolve(values.out as string);
writeFileSync(out, `${JSON.stringify({ machine: { cores: cpus().length, cpu: cpus()[0]?.model }, settings: { threads, connections, seconds, warmup }, figures, signing: { runtime, openssl }, ratios }, null, 2)}\n`);
console.log(`\nwrote ${out}`);
