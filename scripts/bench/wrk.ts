/**
 * Runs wrk (the one load generator of every figure) and returns its summary. A Lua `done` hook
 * prints the numbers as JSON, so nothing depends on wrk's human-readable output.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface LoadSpec {
  url: string;
  method?: "GET" | "POST";
  body?: string;
  headers?: Record<string, string>;
  connections: number;
  threads: number;
  seconds: number;
  /**
   * Paced load: each connection waits this many milliseconds (mean; whole milliseconds drawn at
   * random around it) before each request, so the rate is about connections ÷ (delay + latency).
   * wrk takes a request's start after its wait, so latencies never include it.
   */
  delayMs?: number;
  /**
   * Files of request bodies, one per line, one file per thread: each request takes its thread's
   * next line (single-use bodies, such as client assertions). A thread that runs out starts over.
   */
  bodyFiles?: string[];
}

export interface LoadResult {
  requests: number;
  perSecond: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Non-2xx/3xx answers plus socket errors and timeouts. */
  errors: number;
}

const luaString = (value: string) => `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

function luaScript(spec: LoadSpec): string {
  const lines = [`wrk.method = ${luaString(spec.method ?? "GET")}`];
  if (spec.body !== undefined) lines.push(`wrk.body = ${luaString(spec.body)}`);
  for (const [name, value] of Object.entries(spec.headers ?? {})) lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`);
  if (spec.bodyFiles !== undefined) {
    lines.push(
      `local files = { ${spec.bodyFiles.map(luaString).join(", ")} }`,
      "local threadCount = 0",
      "setup = function(thread)",
      "  threadCount = threadCount + 1",
      "  thread:set(\"bodyFile\", files[(threadCount - 1) % #files + 1])",
      "end",
      "init = function(args)",
      "  bodies = {}",
      "  for line in io.lines(bodyFile) do bodies[#bodies + 1] = line end",
      "  nextBody = 0",
      "end",
      "request = function()",
      "  nextBody = nextBody % #bodies + 1",
      "  return wrk.format(nil, nil, nil, bodies[nextBody])",
      "end",
    );
  }
  if (spec.delayMs !== undefined) {
    const whole = Math.floor(spec.delayMs);
    lines.push(`delay = function() if math.random() < ${(spec.delayMs - whole).toFixed(4)} then return ${whole + 1} end return ${whole} end`);
  }
  lines.push(
    "done = function(summary, latency, requests)",
    "  local e = summary.errors",
    '  io.write(string.format(\'WRKJSON {"requests":%d,"duration_us":%d,"errors":%d,"mean_us":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\\n\',',
    "    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,",
    "    math.floor(latency.mean), latency:percentile(50), latency:percentile(99), latency.max))",
    "end",
  );
  return `${lines.join("\n")}\n`;
}

/** True when wrk is installed. */
export const haveWrk = () => Bun.which("wrk") !== null;

export async function runWrk(spec: LoadSpec): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), "tokenmint-wrk-"));
  try {
    const script = join(dir, "load.lua");
    writeFileSync(script, luaScript(spec));
    const proc = Bun.spawn(["wrk", `-t${spec.threads}`, `-c${spec.connections}`, `-d${spec.seconds}s`, "-s", script, spec.url], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    const line = out.split("\n").find((l) => l.startsWith("WRKJSON "));
    if (code !== 0 || line === undefined) throw new Error(`wrk failed (${code}): ${err.trim() || out.trim()}`);
    const raw = JSON.parse(line.slice(8)) as { requests: number; duration_us: number; errors: number; mean_us: number; p50_us: number; p99_us: number; max_us: number };
    return {
      requests: raw.requests,
      perSecond: raw.requests / (raw.duration_us / 1e6),
      meanMs: raw.mean_us / 1000,
      p50Ms: raw.p50_us / 1000,
      p99Ms: raw.p99_us / 1000,
      maxMs: raw.max_us / 1000,
      errors: raw.errors,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
