/**
 * CONTRACT §1: a bad setting stops start-up with a one-line reason and never damages the data;
 * help, version and usage errors; the generated master key.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { claimPort } from "../../src/cli/serve.ts";
import { api, BUN, cleanup, freePort, newMasterKey, processEnv, REPO_ROOT, runTokenmint, spawnTokenmint, startServer, tempDataDir, waitFor, type CliResult } from "./process.ts";

afterEach(cleanup);

/** Runs `serve` with `settings` in a fresh data directory on a free port; it is expected to exit. */
async function serveWith(settings: Record<string, string | undefined>, dataDir = tempDataDir()): Promise<CliResult> {
  const env = processEnv({ TOKENMINT_DATA_DIR: dataDir, TOKENMINT_HOST: "127.0.0.1", TOKENMINT_PORT: String(await freePort()), ...settings });
  return runTokenmint(["serve"], env, 8000);
}

/** Exit code non-zero and exactly one stderr line; returns that line. */
function refusal(result: CliResult): string {
  expect(result.code).not.toBe(0);
  expect(result.stderrLines).toHaveLength(1);
  return result.stderrLines[0] as string;
}

const sha256 = (path: string) => new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");

describe("bad settings stop start-up with one line that names the problem", () => {
  const cases: [string, Record<string, string>, RegExp][] = [
    ["unknown signing algorithm", { TOKENMINT_SIGNING_ALG: "HS256" }, /TOKENMINT_SIGNING_ALG.*HS256/],
    ["port out of range", { TOKENMINT_PORT: "70000" }, /TOKENMINT_PORT.*70000/],
    ["port not a number", { TOKENMINT_PORT: "abc" }, /TOKENMINT_PORT.*abc/],
    ["rotation period below the minimum", { TOKENMINT_KEY_ROTATION_PERIOD: "5" }, /TOKENMINT_KEY_ROTATION_PERIOD/],
    ["short bootstrap API key", { TOKENMINT_BOOTSTRAP_API_KEY: "short" }, /TOKENMINT_BOOTSTRAP_API_KEY.*32/],
    ["master key of the wrong length", { TOKENMINT_MASTER_KEY: "not-32-bytes" }, /TOKENMINT_MASTER_KEY.*32 bytes/],
    ["short bootstrap API key (the value is not echoed)", { TOKENMINT_BOOTSTRAP_API_KEY: "SECRET-SENTINEL" }, /TOKENMINT_BOOTSTRAP_API_KEY/],
    ["missing master key file", { TOKENMINT_MASTER_KEY_FILE: "/nonexistent" }, /\/nonexistent.*does not exist/],
  ];
  for (const [name, settings, pattern] of cases) {
    test(name, async () => {
      const line = refusal(await serveWith(settings));
      expect(line).toMatch(pattern);
      expect(line).not.toContain("    at ");
      // Secrets are named, never echoed.
      for (const [env, value] of Object.entries(settings)) if (/KEY$/.test(env)) expect(line).not.toContain(value);
    });
  }

  test("several bad settings are all reported at once", async () => {
    const result = await serveWith({ TOKENMINT_SIGNING_ALG: "HS256", TOKENMINT_PORT: "70000", TOKENMINT_KEY_ROTATION_PERIOD: "5", TOKENMINT_BOOTSTRAP_API_KEY: "short" });
    expect(result.code).toBe(1);
    const line = refusal(result);
    for (const name of ["TOKENMINT_SIGNING_ALG", "TOKENMINT_PORT", "TOKENMINT_KEY_ROTATION_PERIOD", "TOKENMINT_BOOTSTRAP_API_KEY"]) expect(line).toContain(name);
  });

  test("a wrong master key for existing data stops start-up and changes nothing", async () => {
    const keyA = newMasterKey();
    const first = await startServer({ masterKey: keyA });
    expect(await first.proc.stop()).toBe(0);
    const dataFile = join(first.dataDir, "tokenmint.mdb");
    const before = sha256(dataFile);

    const keyB = newMasterKey();
    const result = await serveWith({ TOKENMINT_MASTER_KEY: keyB }, first.dataDir);
    expect(result.code).toBe(1);
    expect(refusal(result)).toMatch(/does not match/);
    expect(result.stderr).not.toContain(keyB);
    expect(sha256(dataFile)).toBe(before);
    expect(existsSync(join(first.dataDir, "master.key"))).toBe(false);

    const again = await startServer({ dataDir: first.dataDir, masterKey: keyA });
    expect(await again.proc.stop()).toBe(0);
  });

  test("a port already in use is reported clearly", async () => {
    const blocker = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("taken") });
    try {
      const result = await serveWith({ TOKENMINT_PORT: String(blocker.port), TOKENMINT_MASTER_KEY: newMasterKey() });
      expect(result.code).toBe(1);
      expect(refusal(result)).toMatch(new RegExp(`127\\.0\\.0\\.1:${blocker.port} is already in use`));
    } finally {
      await blocker.stop(true);
    }
  });

  test("a busy port or a bad host is found before anything is written to a new data directory", async () => {
    const blocker = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("taken") });
    try {
      const cases: [Record<string, string>, RegExp][] = [
        [{ TOKENMINT_PORT: String(blocker.port), TOKENMINT_WORKERS: "1" }, new RegExp(`127\\.0\\.0\\.1:${blocker.port} is already in use`)],
        [{ TOKENMINT_PORT: String(blocker.port), TOKENMINT_WORKERS: "2" }, new RegExp(`127\\.0\\.0\\.1:${blocker.port} is already in use`)],
        [{ TOKENMINT_METRICS_PORT: String(blocker.port) }, new RegExp(`127\\.0\\.0\\.1:${blocker.port} is already in use \\(TOKENMINT_METRICS_PORT\\)`)],
        [{ TOKENMINT_HOST: "256.1.1.1", TOKENMINT_WORKERS: "1" }, /cannot listen on 256\.1\.1\.1:\d+: /],
        [{ TOKENMINT_METRICS_HOST: "no-such-host.invalid", TOKENMINT_METRICS_PORT: String(await freePort()) }, /cannot listen on no-such-host\.invalid:\d+ \(metrics\)/],
      ];
      for (const [settings, pattern] of cases) {
        // Without a master key setting: start-up would generate master.key in the data directory.
        const dataDir = tempDataDir();
        const result = await serveWith({ ...settings, TOKENMINT_MASTER_KEY: undefined, TOKENMINT_MASTER_KEY_FILE: undefined }, dataDir);
        expect({ settings, code: result.code }).toEqual({ settings, code: 1 });
        expect(refusal(result)).toMatch(pattern);
        expect({ settings, files: readdirSync(dataDir) }).toEqual({ settings, files: [] });
      }
    } finally {
      await blocker.stop(true);
    }
  }, 30_000);

  test("a master key that cannot be used is found before anything is written to a new data directory", async () => {
    const badFile = join(tempDataDir(), "master-key");
    writeFileSync(badFile, "not a key\n");
    const cases: [Record<string, string>, RegExp][] = [
      [{ TOKENMINT_MASTER_KEY: "abc" }, /TOKENMINT_MASTER_KEY.*32 bytes/],
      [{ TOKENMINT_MASTER_KEY_FILE: "/nonexistent" }, /\/nonexistent does not exist/],
      [{ TOKENMINT_MASTER_KEY_FILE: badFile }, /master key from .*master-key is not valid base64url|must decode to 32 bytes/],
    ];
    for (const [settings, pattern] of cases) {
      for (const args of [["serve"], ["apikeys", "create", "--name", "ci"]]) {
        const dataDir = tempDataDir();
        const env = processEnv({ TOKENMINT_DATA_DIR: dataDir, TOKENMINT_PORT: String(await freePort()), TOKENMINT_WORKERS: "1", ...settings });
        const result = await runTokenmint(args, env, 8000);
        expect({ args, settings, code: result.code }).toEqual({ args, settings, code: 1 });
        expect(refusal(result)).toMatch(pattern);
        expect({ args, settings, files: readdirSync(dataDir) }).toEqual({ args, settings, files: [] });
      }
    }
  }, 30_000);

  test("a port another tokenmint server has claimed is in use, even before its workers bind it", async () => {
    // Two servers started in the same instant both find the port free; the claim decides.
    const port = await freePort();
    const claim = claimPort("127.0.0.1", port);
    expect(claim).toBeDefined();
    try {
      expect(() => claimPort("127.0.0.1", port)).toThrow(`127.0.0.1:${port} is already in use by another tokenmint server`);
      for (const workers of ["1", "2"]) {
        const dataDir = tempDataDir();
        const result = await serveWith({ TOKENMINT_PORT: String(port), TOKENMINT_WORKERS: workers, TOKENMINT_MASTER_KEY: newMasterKey() }, dataDir);
        expect({ workers, line: refusal(result), files: readdirSync(dataDir) }).toEqual({
          workers,
          line: `tokenmint: 127.0.0.1:${port} is already in use by another tokenmint server`,
          files: [],
        });
      }
    } finally {
      claim?.release();
    }
    // Released, it can be claimed again; a running server holds the claim of its port until it stops.
    claimPort("127.0.0.1", port)?.release();
    const server = await startServer({ settings: { TOKENMINT_WORKERS: "2" } });
    expect(() => claimPort("127.0.0.1", server.port)).toThrow(`127.0.0.1:${server.port} is already in use by another tokenmint server`);
    expect(await server.proc.stop()).toBe(0);
    claimPort("127.0.0.1", server.port)?.release();
  }, 20_000);

  test.skipIf(process.getuid?.() !== 0 || Bun.which("setpriv") === null)("another user's claim of the port blocks nothing: claims are per user", async () => {
    const port = await freePort();
    // As another user: the claim a server of that user would make.
    const squatter = Bun.spawn(
      ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BUN, "-e", `(await import(${JSON.stringify(join(REPO_ROOT, "src/cli/serve.ts"))})).claimPort("127.0.0.1", ${port}); console.log("claimed"); setInterval(() => {}, 1000);`],
      { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? "", HOME: "/tmp", BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" }, stdout: "pipe", stderr: "inherit" },
    );
    try {
      const reader = squatter.stdout.getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toBe("claimed\n");
      const env = processEnv({ TOKENMINT_DATA_DIR: tempDataDir(), TOKENMINT_HOST: "127.0.0.1", TOKENMINT_PORT: String(port), TOKENMINT_MASTER_KEY: newMasterKey(), TOKENMINT_WORKERS: "2" });
      const server = spawnTokenmint(["serve"], env);
      const healthy = await waitFor("the server to answer", async () => {
        try {
          return (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200 ? true : undefined;
        } catch {
          return server.done ? false : undefined;
        }
      }, 10_000);
      expect({ healthy, stderr: server.stderr }).toEqual({ healthy: true, stderr: [] });
      expect(await server.stop()).toBe(0);
    } finally {
      squatter.kill("SIGKILL");
    }
  }, 20_000);

  test("a port held by another server's workers (SO_REUSEPORT) is in use too: never shared", async () => {
    // As another tokenmint's workers hold it.
    const blocker = Bun.serve({ hostname: "127.0.0.1", port: 0, reusePort: true, development: false, fetch: () => new Response("taken") });
    try {
      for (const workers of ["1", "2"]) {
        const result = await serveWith({ TOKENMINT_PORT: String(blocker.port), TOKENMINT_WORKERS: workers, TOKENMINT_MASTER_KEY: newMasterKey() });
        expect({ workers, code: result.code }).toEqual({ workers, code: 1 });
        expect(refusal(result)).toMatch(new RegExp(`127\\.0\\.0\\.1:${blocker.port} is already in use`));
      }
    } finally {
      await blocker.stop(true);
    }
  }, 20_000);
});

describe("one server per data directory", () => {
  test("a refused second serve, with other settings, changes nothing in the data first", async () => {
    const masterKey = newMasterKey();
    const first = await startServer({ masterKey, settings: { TOKENMINT_KEY_ROTATION_PERIOD: "86400" } });
    const state = async () => {
      const keys = await runTokenmint(["keys", "list", "--json"], first.env);
      const check = await runTokenmint(["check", "--json"], first.env);
      return { keys: keys.stdout, issuer: (JSON.parse(check.stdout) as { issuer: string }).issuer };
    };
    const before = await state();
    const bootstrap = `tm_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url")}`;
    for (const workers of ["1", "2"]) {
      const second = await serveWith(
        {
          TOKENMINT_MASTER_KEY: masterKey,
          TOKENMINT_WORKERS: workers,
          TOKENMINT_SIGNING_ALG: "RS256",
          TOKENMINT_KEY_ROTATION_PERIOD: "60",
          TOKENMINT_PUBLIC_URL: "https://elsewhere.example.net",
          TOKENMINT_BOOTSTRAP_API_KEY: bootstrap,
        },
        first.dataDir,
      );
      expect(refusal(second)).toMatch(new RegExp(`another tokenmint server \\(pid ${first.proc.pid}\\) is serving the data directory`));
      expect(second.stdout).toBe("");
    }
    expect(await state()).toEqual(before);
    expect((await api(first, bootstrap, "GET", "/v1/providers")).status).toBe(401);
    expect(first.proc.logs().filter((line) => /rotated|replaced/.test(String(line.msg)))).toEqual([]);
    expect(await first.proc.stop()).toBe(0);
  }, 30_000);

  test("a second serve on the same data directory is refused; a killed server's lock is stale", async () => {
    const masterKey = newMasterKey();
    const first = await startServer({ masterKey });
    const second = await serveWith({ TOKENMINT_MASTER_KEY: masterKey, TOKENMINT_PORT: String(await freePort()) }, first.dataDir);
    expect(second.code).toBe(1);
    expect(refusal(second)).toMatch(new RegExp(`another tokenmint server \\(pid ${first.proc.pid}\\) is serving the data directory`));
    expect(first.proc.done).toBe(false);

    first.proc.signal("SIGKILL");
    await first.proc.exited;
    expect(existsSync(join(first.dataDir, "serve.pid"))).toBe(true);
    const third = await startServer({ dataDir: first.dataDir, masterKey });
    expect(await third.proc.stop()).toBe(0);
    expect(existsSync(join(first.dataDir, "serve.pid"))).toBe(false);
  });
});

describe("help, version and usage errors", () => {
  const env = () => processEnv({ TOKENMINT_DATA_DIR: tempDataDir() });
  const cases: [string[], string[]][] = [
    [["--help"], ["serve", "apikeys create", "apikeys list", "apikeys revoke", "keys list", "keys rotate", "keys revoke"]],
    [["serve", "--help"], ["tokenmint serve", "SIGTERM", "TOKENMINT_PORT"]],
    [["apikeys", "--help"], ["apikeys create", "apikeys list", "apikeys revoke"]],
    [["keys", "--help"], ["keys list", "keys rotate", "keys revoke"]],
  ];
  for (const [args, mentions] of cases) {
    test(`${args.join(" ")} exits 0 and describes its commands`, async () => {
      const result = await runTokenmint(args, env());
      expect(result.code).toBe(0);
      for (const text of mentions) expect(result.stdout).toContain(text);
      expect(result.stderr).toBe("");
    });
  }

  test("--version prints 'tokenmint <version>'", async () => {
    const result = await runTokenmint(["--version"], env());
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toMatch(/^tokenmint \S+/);
    expect(result.stdout.trim().split("\n")).toHaveLength(1);
  });

  test("no command at all: the help on stdout, one line on stderr, exit 2", async () => {
    const result = await runTokenmint([], env());
    expect(result.code).toBe(2);
    expect(result.stdout).toContain("apikeys create");
    expect(result.stderrLines).toEqual(["tokenmint: usage error: no command given; see 'tokenmint --help'"]);
  });

  test("an unknown command exits 2 with one line", async () => {
    const dataDir = tempDataDir();
    const result = await runTokenmint(["frobnicate"], processEnv({ TOKENMINT_DATA_DIR: dataDir }));
    expect(result.code).toBe(2);
    expect(result.stderrLines).toHaveLength(1);
    expect(result.stderrLines[0]).toContain("frobnicate");
    expect(existsSync(join(dataDir, "tokenmint.mdb"))).toBe(false);
  });
});

describe("a master key file others can read", () => {
  test("is used, with a warning naming the file and its mode; kept close, it starts without one", async () => {
    const file = join(tempDataDir(), "master-key");
    writeFileSync(file, `${newMasterKey()}\n`);
    chmodSync(file, 0o644);
    const loose = await startServer({ masterKey: null, settings: { TOKENMINT_MASTER_KEY_FILE: file } });
    const warning = loose.proc.logs().find((line) => line.level === "warn");
    expect(warning).toMatchObject({ msg: expect.stringContaining("the master key file can be read or changed by other users"), path: file, mode: "0644" });
    expect(await loose.proc.stop()).toBe(0);

    chmodSync(file, 0o600);
    const close = await startServer({ dataDir: loose.dataDir, masterKey: null, settings: { TOKENMINT_MASTER_KEY_FILE: file } });
    expect(close.proc.logs().filter((line) => line.level === "warn")).toEqual([]);
    expect(await close.proc.stop()).toBe(0);
  });
});

describe("generated master key", () => {
  test("first start generates <data-dir>/master.key (0600) with a warning; without it later, start-up refuses", async () => {
    const first = await startServer({ masterKey: null });
    const keyFile = join(first.dataDir, "master.key");
    expect(existsSync(keyFile)).toBe(true);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(keyFile, "utf8").trim()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const warning = first.proc.logs().find((line) => line.level === "warn");
    expect(warning?.msg).toMatch(/master key generated/);
    expect(await first.proc.stop()).toBe(0);

    rmSync(keyFile);
    const dataFile = join(first.dataDir, "tokenmint.mdb");
    const before = sha256(dataFile);
    const result = await serveWith({}, first.dataDir);
    expect(result.code).toBe(1);
    expect(refusal(result)).toMatch(/master key/);
    expect(existsSync(keyFile)).toBe(false);
    expect(sha256(dataFile)).toBe(before);
  });
});
