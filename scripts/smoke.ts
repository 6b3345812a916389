/**
 * Smoke test of the compiled executable, as an operator would use it:
 *
 *   bun scripts/smoke.ts [dist/tokenmint]
 *
 * Copies the binary alone into an empty temp directory, checks that a missing TMPDIR (where it
 * unpacks LMDB's native addon) is one line on stderr and exit 1, starts it there with a clean
 * environment, creates an API key with its own CLI, creates a provider, a client and a token over
 * HTTP, verifies the token against the served JWKS with jose, sends SIGTERM while requests are in
 * flight, and expects every request answered and exit code 0 within 10 s. It runs with the default
 * TOKENMINT_WORKERS (one worker per core), so the binary starts copies of itself. The keys are
 * RS256 and the start-up log must say they are signed through the system's libcrypto (bun:ffi
 * inside the compiled executable).
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createRemoteJWKSet, jwtVerify } from "jose";

const binary = resolve(process.argv[2] ?? "dist/tokenmint");
const dir = mkdtempSync(join(tmpdir(), "tokenmint-smoke-"));
const exe = join(dir, "tokenmint");
copyFileSync(binary, exe);

/** A failed check: reported once the server is stopped and the temp directory removed. */
class SmokeFailure extends Error {}

function fail(message: string): never {
  throw new SmokeFailure(message);
}

async function freePort(): Promise<number> {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = probe.port as number;
  await probe.stop(true);
  return port;
}

let server: ReturnType<typeof Bun.spawn> | undefined;
try {
  // The executable unpacks LMDB's native addon into TMPDIR: a missing one is one line and exit 1.
  {
    const run = Bun.spawnSync([exe, "keys", "list"], { cwd: dir, env: { PATH: "/usr/bin:/bin", TMPDIR: join(dir, "missing") }, stdout: "pipe", stderr: "pipe" });
    const lines = run.stderr.toString().split("\n").filter((line) => line !== "");
    if (run.exitCode !== 1 || lines.length !== 1 || !lines[0]?.includes(`TMPDIR=${join(dir, "missing")}`)) {
      fail(`a missing TMPDIR should give exit 1 and one line naming it, got ${run.exitCode}: ${lines.join(" / ")}`);
    }
  }
  // A TMPDIR mounted noexec: the same, and the line says why. Mounting needs root (and unshare, so
  // that the mount is this command's alone); elsewhere this check is skipped.
  if (process.getuid?.() === 0 && Bun.which("unshare") !== null) {
    const noexec = join(dir, "no-running");
    mkdirSync(noexec);
    const script = `mount -t tmpfs -o noexec tmpfs "$1" || exit 99; TMPDIR="$1" "$2" --version`;
    const run = Bun.spawnSync(["unshare", "--mount", "sh", "-c", script, "sh", noexec, exe], { cwd: dir, env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }, stdout: "pipe", stderr: "pipe" });
    const lines = run.stderr.toString().split("\n").filter((line) => line !== "");
    if (run.exitCode !== 99 && (run.exitCode !== 1 || lines.length !== 1 || !lines[0]?.includes("not be mounted noexec"))) {
      fail(`a TMPDIR mounted noexec should give exit 1 and one line saying so, got ${run.exitCode}: ${lines.join(" / ")}`);
    }
  }

  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = { PATH: "/usr/bin:/bin", TOKENMINT_PORT: String(port), TOKENMINT_PUBLIC_URL: base, TOKENMINT_SIGNING_ALG: "RS256" };
  const serving = Bun.spawn([exe, "serve"], { cwd: dir, env, stdout: "pipe", stderr: "pipe" });
  server = serving;
  let logText = "";
  const logRead = (async () => {
    for await (const chunk of serving.stdout) logText += new TextDecoder().decode(chunk);
  })();
  /** The log's whole lines as objects: the last piece may still be arriving. */
  const logEntries = () =>
    logText
      .split("\n")
      .slice(0, -1)
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, string>);
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (serving.exitCode !== null) fail(`server exited early with ${serving.exitCode}: ${await new Response(serving.stderr).text()}`);
    if (Date.now() > deadline) fail("server did not become ready within 10 s");
    const ready = await fetch(`${base}/readyz`).then((r) => r.ok, () => false);
    if (ready) break;
    await Bun.sleep(50);
  }

  // The signers line comes after the first answers (libcrypto loads once the server answers).
  const signersLine = () => logEntries().find((entry) => entry.msg === "signers");
  let signers = signersLine();
  while (signers === undefined && Date.now() <= deadline && serving.exitCode === null) {
    await Bun.sleep(50);
    signers = signersLine();
  }
  if (signers?.RS256 !== "libcrypto") fail(`RS256 is not signed through libcrypto: ${JSON.stringify(signers)}`);
  if (logText.includes("libcrypto cannot sign")) fail("libcrypto failed its check against the built-in signer");

  const cli = Bun.spawnSync([exe, "apikeys", "create", "--name", "smoke"], { cwd: dir, env });
  if (cli.exitCode !== 0) fail(`apikeys create exited ${cli.exitCode}: ${cli.stderr.toString()}`);
  const apiKey = cli.stdout.toString().trim();
  const call = async (path: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (res.status !== 201) fail(`POST ${path} answered ${res.status}: ${await res.text()}`);
    return (await res.json()) as Record<string, string>;
  };
  const provider = await call("/v1/providers", { name: "smoke" });
  const client = await call(`/v1/providers/${provider.id}/clients`, { name: "smoke", audience: "https://smoke.example" });
  const tokenPath = `/v1/providers/${provider.id}/clients/${client.id}/tokens`;
  const token = await call(tokenPath, { expiresIn: 300 });

  const discovery = (await (await fetch(`${base}/.well-known/openid-configuration`)).json()) as { issuer: string; jwks_uri: string };
  if (discovery.issuer !== base) fail(`discovery issuer ${discovery.issuer} is not ${base}`);
  const { payload } = await jwtVerify(token.accessToken as string, createRemoteJWKSet(new URL(discovery.jwks_uri)), {
    issuer: base,
    audience: "https://smoke.example",
    typ: "at+jwt",
  });
  if (payload.sub !== client.id) fail("token subject is not the client id");

  // SIGTERM with requests in flight: each must get a complete answer, and the process exits 0.
  const inflight = Array.from({ length: 20 }, () =>
    fetch(`${base}${tokenPath}`, { method: "POST", headers: { authorization: `Bearer ${apiKey}` } }).then(
      (r) => r.status,
      (e: Error) => `error: ${e.message}`,
    ),
  );
  await Bun.sleep(5);
  const stoppedAt = Date.now();
  serving.kill("SIGTERM");
  const statuses = await Promise.all(inflight);
  const code = await Promise.race([serving.exited, Bun.sleep(10_000).then(() => "timeout")]);
  if (code !== 0) fail(`exit after SIGTERM was ${code}`);
  const broken = statuses.filter((s) => s !== 201 && s !== 503);
  if (broken.length > 0) fail(`in-flight requests were not answered: ${broken.join(", ")}`);
  // The default TOKENMINT_WORKERS (one per core): the binary started that many copies of itself.
  await logRead;
  const log = logEntries();
  const workers = Number(log.find((line) => line.msg === "tokenmint started")?.workers ?? 1);
  const workerLines = log.filter((line) => line.msg === "worker started").length;
  if (workers > 1 && workerLines !== workers) fail(`${workers} workers announced, ${workerLines} started`);
  console.log(
    `smoke: ok — binary served from an empty directory (${workers > 1 ? `${workers} workers` : "one process"}), RS256 token signed by ${signers.libcrypto} verified, SIGTERM exit 0 in ${Date.now() - stoppedAt} ms`,
  );
} catch (error) {
  if (!(error instanceof SmokeFailure)) throw error;
  console.error(`smoke: FAILED: ${error.message}`);
  process.exitCode = 1;
} finally {
  // A failure must not leave the server (and through it, its workers) running.
  if (server !== undefined && server.exitCode === null) {
    server.kill("SIGKILL");
    await server.exited;
  }
  rmSync(dir, { recursive: true, force: true });
}
