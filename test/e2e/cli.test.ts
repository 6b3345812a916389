/**
 * CONTRACT §1: the CLI works on the data directory while the server runs, and what it changes
 * takes effect in the running server from its next request on. No output holds secrets or private keys.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { base64url, decodeProtectedHeader, type JSONWebKeySet } from "jose";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { createApiKey } from "../../src/core/api-keys.ts";
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import { api, BUN, cleanup, newMasterKey, processEnv, REPO_ROOT, runTokenmint, startServer, tempDataDir, waitFor, type Server } from "./process.ts";

afterEach(cleanup);

const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "k"];

/** base64url SHA-256 of a key: what the store keeps. */
async function hashOf(secret: string): Promise<string> {
  return base64url.encode(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret))));
}

async function cli(server: Server, ...args: string[]) {
  return runTokenmint(args, server.env);
}

async function cliJson<T>(server: Server, ...args: string[]): Promise<T> {
  const result = await cli(server, ...args);
  if (result.code !== 0) throw new Error(`tokenmint ${args.join(" ")} exited ${result.code}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

interface ApiKeyJson {
  id: string;
  name: string;
  status: string;
  createdAt: string;
  expiresAt: string | null;
  key?: string;
}

const jwksKids = async (server: Server) => ((await (await fetch(`${server.url}/.well-known/jwks`)).json()) as JSONWebKeySet).keys.map((k) => k.kid);

describe("a word more than a command takes", () => {
  test("is a usage error (exit 2) before anything is changed", async () => {
    const server = await startServer();
    const first = await cliJson<ApiKeyJson>(server, "apikeys", "create", "--name", "one", "--json");
    const second = await cliJson<ApiKeyJson>(server, "apikeys", "create", "--name", "two", "--json");
    const keysBefore = await cliJson<{ items: { kid: string }[] }>(server, "keys", "list", "--json");
    for (const args of [
      ["apikeys", "revoke", first.id, second.id],
      ["apikeys", "list", "extra"],
      ["keys", "rotate", "acme"],
      ["keys", "revoke", "kid1", "kid2"],
      ["keys", "list", "extra"],
      ["projects", "list", "extra"],
      ["serve", "extra"],
    ]) {
      const result = await cli(server, ...args);
      expect({ args, code: result.code }).toEqual({ args, code: 2 });
      expect(result.stderrLines).toHaveLength(1);
      expect(result.stderrLines[0]).toContain("unexpected argument");
    }
    const keys = await cliJson<{ items: ApiKeyJson[] }>(server, "apikeys", "list", "--json");
    expect(keys.items.filter((k) => k.status === "revoked")).toEqual([]);
    expect(await cliJson<{ items: { kid: string }[] }>(server, "keys", "list", "--json")).toEqual(keysBefore);
  });
});

describe("a data directory that holds no data yet", () => {
  test("only the create commands start it; every other command says so (exit 1) and creates nothing", async () => {
    const parent = tempDataDir();
    const missing = join(parent, "typo");
    const env = processEnv({ TOKENMINT_DATA_DIR: missing, TOKENMINT_MASTER_KEY: newMasterKey(), TOKENMINT_SIGNING_ALG: "ES256" });
    for (const args of [
      ["apikeys", "list"],
      ["apikeys", "revoke", "6f1c8f0e-0b5e-4c4e-9a51-1f0f7c1f2d3a"],
      ["keys", "list", "--json"],
      ["keys", "rotate"],
      ["keys", "revoke", "some-kid"],
      ["projects", "list"],
    ]) {
      const result = await runTokenmint(args, env);
      expect({ args, code: result.code, stdout: result.stdout, stderr: result.stderrLines }).toEqual({
        args,
        code: 1,
        stdout: "",
        stderr: [`tokenmint: no data yet in ${missing}; start the server or create an API key or project first`],
      });
      expect(readdirSync(parent)).toEqual([]);
    }
    // A create for a project that new data cannot hold yet fails the same way, creating nothing.
    const forAcme = await runTokenmint(["apikeys", "create", "--name", "x", "--project", "acme"], env);
    expect({ code: forAcme.code, stderr: forAcme.stderrLines }).toEqual({ code: 1, stderr: ["tokenmint: no project 'acme'; see 'tokenmint projects list'"] });
    expect(readdirSync(parent)).toEqual([]);
    // The default project is on new data from the start: a create for it makes the data.
    const forDefault = await runTokenmint(["apikeys", "create", "--name", "x", "--project", "default"], env);
    expect(forDefault.code).toBe(0);
    rmSync(missing, { recursive: true });
    // A create with a bad value is a usage error (exit 2) naming the flag, found before the data
    // directory is opened: it creates nothing either.
    for (const [args, flag] of [
      [["apikeys", "create"], "--name"],
      [["apikeys", "create", "--name", "x", "--expires-in", "0"], "--expires-in"],
      [["projects", "create", "--slug", "Acme"], "--slug"],
      [["projects", "create", "--slug", "default"], "--slug"],
      [["projects", "create", "--slug", "acme", "--name", " "], "--name"],
      [["projects", "create", "--slug", "acme", "--signing-alg", "HS256"], "--signing-alg"],
      [["projects", "create", "--slug", "acme", "--key-rotation-period", "30"], "--key-rotation-period"],
      [["projects", "create", "--slug", "acme", "--key-rotation-period", "1h"], "--key-rotation-period"],
      [["projects", "create", "--slug", "acme", "--default-token-lifetime", "0"], "--default-token-lifetime"],
      [["projects", "create", "--slug", "acme", "--custom-domain", "https://auth.acme.test"], "--custom-domain"],
      [["projects", "create", "--slug", "acme", "--custom-domain", "acme.localhost"], "--custom-domain"],
    ] as const) {
      const result = await runTokenmint([...args], env);
      expect({ args, code: result.code, lines: result.stderrLines.length }).toEqual({ args, code: 2, lines: 1 });
      expect(result.stderrLines[0]).toStartWith(`tokenmint: usage error: ${flag} `);
      expect(readdirSync(parent)).toEqual([]);
    }
    const unknown = await runTokenmint(["apikeys", "show"], env);
    expect(unknown.code).toBe(2);
    expect(readdirSync(parent)).toEqual([]);
    const created = await runTokenmint(["apikeys", "create", "--name", "first"], env);
    expect(created.code).toBe(0);
    expect(existsSync(join(missing, "tokenmint.mdb"))).toBe(true);
    const listed = await runTokenmint(["apikeys", "list", "--json"], env);
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as { items: ApiKeyJson[] }).items.map((k) => k.name)).toEqual(["first"]);
  });
});

describe("apikeys", () => {
  test("create --json, list (table and --json) without secrets, revoke takes effect in the running server", async () => {
    const server = await startServer();
    const created = await cliJson<ApiKeyJson>(server, "apikeys", "create", "--name", "x", "--json");
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.name).toBe("x");
    expect(created.key).toMatch(/^\S{32,}$/);
    const secret = created.key as string;
    expect((await api(server, secret, "GET", "/v1/providers")).status).toBe(200);

    const hash = await hashOf(secret);
    const table = await cli(server, "apikeys", "list");
    expect(table.code).toBe(0);
    expect(table.stdout).toContain(created.id);
    expect(table.stdout).toMatch(/\bx\b/);
    const listed = await cliJson<{ items: ApiKeyJson[] }>(server, "apikeys", "list", "--json");
    expect(listed.items.map((k) => k.id)).toEqual([created.id]);
    expect(listed.items[0]).not.toHaveProperty("key");
    expect(listed.items[0]?.status).toBe("active");
    for (const output of [table.stdout, table.stderr, JSON.stringify(listed)]) {
      expect(output).not.toContain(secret);
      expect(output).not.toContain(hash);
    }

    // The id as a tool that writes UUIDs in capitals gives it: ids are case-insensitive.
    const revoked = await cli(server, "apikeys", "revoke", created.id.toUpperCase());
    expect(revoked.code).toBe(0);
    expect(revoked.stdout + revoked.stderr).not.toContain(secret);
    expect((await api(server, secret, "GET", "/v1/providers")).status).toBe(401);
    const after = await cliJson<{ items: ApiKeyJson[] }>(server, "apikeys", "list", "--json");
    expect(after.items[0]?.status).toBe("revoked");
  });

  test("create --expires-in 1: the key works, then expires", async () => {
    const server = await startServer();
    const created = await cliJson<ApiKeyJson>(server, "apikeys", "create", "--name", "short-lived", "--expires-in", "1", "--json");
    expect(Date.parse(created.expiresAt as string) - Date.parse(created.createdAt)).toBe(1000);
    const secret = created.key as string;
    const expiresAt = Date.parse(created.expiresAt as string);
    const first = await api(server, secret, "GET", "/v1/providers");
    // Answered before the expiry (same machine clock): the key must still have worked.
    if (Date.now() < expiresAt) expect(first.status).toBe(200);
    const res = await waitFor(
      "the key to expire",
      async () => {
        const r = await api(server, secret, "GET", "/v1/providers");
        return r.status === 401 ? r : undefined;
      },
      3000,
      100,
    );
    expect(((await res.json()) as { message: string }).message).toMatch(/expired/i);
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt);
  });

  test("a bootstrap key works, survives a restart and is registered once", async () => {
    const bootstrap = `bootstrap-${base64url.encode(crypto.getRandomValues(new Uint8Array(24)))}`;
    const settings = { TOKENMINT_BOOTSTRAP_API_KEY: bootstrap };
    const first = await startServer({ settings });
    expect((await api(first, bootstrap, "GET", "/v1/providers")).status).toBe(200);
    expect(await first.proc.stop()).toBe(0);

    const masterKey = first.env.TOKENMINT_MASTER_KEY as string;
    const second = await startServer({ dataDir: first.dataDir, masterKey, settings });
    expect((await api(second, bootstrap, "GET", "/v1/providers")).status).toBe(200);
    const listed = await cliJson<{ items: ApiKeyJson[] }>(second, "apikeys", "list", "--json");
    expect(listed.items).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain(bootstrap);
    expect(second.proc.stdout.join("\n")).not.toContain(bootstrap);
  });
});

describe("output into a pipe", () => {
  test("a list larger than a pipe holds reaches a slow reader whole", async () => {
    const dataDir = tempDataDir();
    const env = processEnv({ TOKENMINT_DATA_DIR: dataDir, TOKENMINT_MASTER_KEY: newMasterKey() });
    expect((await runTokenmint(["apikeys", "create", "--name", "first"], env)).code).toBe(0);
    // Enough keys for an output past 64 KiB, written straight into the data (the CLI would take a while).
    const store = openLmdbStore(dataDir);
    const projectId = (await store.getMeta<string>("defaultProjectId")) as string;
    for (let i = 0; i < 400; i++) await createApiKey(store, projectId, `key-${i}-with-a-name-long-enough-to-fill-the-listing`, Date.now());
    await store.close();
    const whole = await runTokenmint(["apikeys", "list", "--json"], env);
    expect(whole.code).toBe(0);
    expect(whole.stdout.length).toBeGreaterThan(65_536);
    // The reader starts a second late: the pipe fills and the rest waits for it.
    const piped = Bun.spawnSync(["sh", "-c", `"$@" apikeys list --json | (sleep 1; cat)`, "sh", BUN, "src/main.ts"], { cwd: REPO_ROOT, env, stdout: "pipe", stderr: "pipe" });
    expect({ code: piped.exitCode, stderr: piped.stderr.toString() }).toEqual({ code: 0, stderr: "" });
    expect(piped.stdout.toString().trimEnd()).toBe(whole.stdout.trimEnd());
    expect((JSON.parse(piped.stdout.toString()) as { items: unknown[] }).items).toHaveLength(401);
  }, 30_000);
});

describe("keys", () => {
  test("commands run with other settings than the server's change no signing key they were not asked to", async () => {
    const server = await startServer();
    const kids = async () => (await cliJson<{ items: { kid: string; alg: string }[] }>(server, "keys", "list", "--json")).items.map((k) => `${k.kid} ${k.alg}`);
    const before = await kids();
    const jwksBefore = await jwksKids(server);
    const otherAlg = { ...server.env, TOKENMINT_SIGNING_ALG: "RS256" };
    for (const args of [["keys", "list"], ["apikeys", "create", "--name", "other-settings"], ["apikeys", "list"], ["projects", "list"]]) {
      const result = await runTokenmint(args, otherAlg);
      expect({ args, code: result.code }).toEqual({ args, code: 0 });
    }
    expect(await kids()).toEqual(before);
    expect(await jwksKids(server)).toEqual(jwksBefore);
    expect(server.proc.logs().filter((line) => line.msg === "next signing key replaced for a new algorithm")).toHaveLength(0);
  });

  test("list --json shows public metadata only", async () => {
    const server = await startServer();
    const result = await cli(server, "keys", "list", "--json");
    expect(result.code).toBe(0);
    const { items } = JSON.parse(result.stdout) as { items: Record<string, unknown>[] };
    expect(items.map((k) => k.state).sort()).toEqual(["current", "next"]);
    const kids = await jwksKids(server);
    expect(items.map((k) => k.kid).sort()).toEqual([...kids].sort() as string[]);
    // No private member anywhere in the output, at any depth.
    JSON.parse(result.stdout, (name, value) => {
      expect(PRIVATE_MEMBERS).not.toContain(name);
      return value;
    });
    const table = await cli(server, "keys", "list");
    expect(table.code).toBe(0);
    for (const kid of kids) expect(table.stdout).toContain(kid as string);
  });

  test("revoke KID of the current key: the running server drops it from the JWKS and signs with another key", async () => {
    const server = await startServer();
    const { items } = await cliJson<{ items: { kid: string; state: string }[] }>(server, "keys", "list", "--json");
    const current = items.find((k) => k.state === "current")?.kid as string;
    expect(await jwksKids(server)).toContain(current);

    const revoked = await cli(server, "keys", "revoke", current);
    expect(revoked.code).toBe(0);
    expect(await jwksKids(server)).not.toContain(current);

    const apiKey = (await cliJson<ApiKeyJson>(server, "apikeys", "create", "--name", "keys", "--json")).key as string;
    const provider = (await (await api(server, apiKey, "POST", "/v1/providers", { name: "p" })).json()) as { id: string };
    const client = (await (await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients`, { name: "c", audience: "a" })).json()) as { id: string };
    const token = (await (await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients/${client.id}/tokens`)).json()) as { accessToken: string };
    expect(decodeProtectedHeader(token.accessToken).kid).not.toBe(current);
  });

  test("rotate right after start is refused with a one-line reason naming the max-age", async () => {
    const server = await startServer({ settings: { TOKENMINT_KEY_ROTATION_PERIOD: "60" } });
    const before = await jwksKids(server);
    const result = await cli(server, "keys", "rotate");
    expect(result.code).toBe(1);
    expect(result.stderrLines).toHaveLength(1);
    expect(result.stderrLines[0]).toMatch(/max-age/);
    expect(result.stdout).toBe("");
    expect(await jwksKids(server)).toEqual(before);
  });
});

describe("projects", () => {
  test("with an IP address for the base domain: create refuses with one line naming TOKENMINT_BASE_DOMAIN, and check fails on data holding projects", async () => {
    const dataDir = tempDataDir();
    const env = processEnv({ TOKENMINT_DATA_DIR: dataDir, TOKENMINT_MASTER_KEY: newMasterKey(), TOKENMINT_SIGNING_ALG: "ES256", TOKENMINT_PUBLIC_URL: "http://10.0.0.5:8080" });
    const refused = await runTokenmint(["projects", "create", "--slug", "acme"], env);
    expect(refused.code).toBe(1);
    expect(refused.stderrLines).toHaveLength(1);
    expect(refused.stderrLines[0]).toMatch(/^tokenmint: Cannot create a project: .*base domain 10\.0\.0\.5:8080 .*set TOKENMINT_BASE_DOMAIN to a DNS name\.$/);
    // Refused before the new data (and its master key) was made.
    expect(readdirSync(dataDir)).toEqual([]);
    const dns = { ...env, TOKENMINT_BASE_DOMAIN: "tm.example.test" };
    expect((await runTokenmint(["projects", "create", "--slug", "acme"], dns)).code).toBe(0);
    expect((await runTokenmint(["check"], dns)).code).toBe(0);
    const check = await runTokenmint(["check"], env);
    expect(check.code).toBe(1);
    expect(check.stderrLines).toEqual([expect.stringMatching(/^tokenmint: cannot serve the projects in .*: .*TOKENMINT_BASE_DOMAIN/)]);
  });

  test("create run with other settings than the server's judges a custom domain by the server's", async () => {
    const server = await startServer();
    // Here the base domain would be example.test; the server's is localhost.
    const other = { ...server.env, TOKENMINT_PUBLIC_URL: "http://example.test:8080" };
    const created = await runTokenmint(["projects", "create", "--slug", "acme", "--custom-domain", "auth.example.test", "--json"], other);
    expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: "" });
    expect(JSON.parse(created.stdout)).toMatchObject({ slug: "acme", customDomain: "auth.example.test", issuer: "http://auth.example.test" });
    const discovery = await fetch(`${server.url}/.well-known/openid-configuration`, { headers: { host: "auth.example.test" } });
    expect(((await discovery.json()) as { issuer: string }).issuer).toBe("http://auth.example.test");

    const refused = await runTokenmint(["projects", "create", "--slug", "beta", "--custom-domain", "beta.localhost"], other);
    expect(refused.code).toBe(2);
    expect(refused.stderrLines).toEqual([expect.stringContaining("--custom-domain must not be the instance's own host or a host under the base domain localhost")]);
    const listed = JSON.parse((await runTokenmint(["projects", "list", "--json"], server.env)).stdout) as { items: { slug: string }[] };
    expect(listed.items.map((p) => p.slug).sort()).toEqual(["acme", "default"]);
  });

  test("create and list; the running server serves the new project at its host from its next request on; --project scopes apikeys and keys", async () => {
    const server = await startServer();
    const host = `acme.localhost:${server.port}`;
    const discovery = async () => {
      const res = await fetch(`${server.url}/.well-known/openid-configuration`, { headers: { host } });
      return ((await res.json()) as { issuer: string }).issuer;
    };
    expect(await discovery()).toBe(`http://localhost:${server.port}`);

    const created = await cliJson<{ id: string; slug: string; url: string; issuer: string; signingAlg: string }>(
      server, "projects", "create", "--slug", "acme", "--name", "Acme", "--signing-alg", "EdDSA", "--json",
    );
    expect(created).toMatchObject({ slug: "acme", url: `http://${host}`, issuer: `http://${host}`, signingAlg: "EdDSA" });
    expect(await discovery()).toBe(`http://${host}`);
    // The keys came with the project: the server made none for it (only the default project's, at its first start).
    expect(server.proc.logs().filter((line) => line.msg === "signing keys created")).toHaveLength(1);
    const acmeKeys = (await (await fetch(`${server.url}/.well-known/jwks`, { headers: { host } })).json()) as JSONWebKeySet;
    expect(acmeKeys.keys.map((k) => k.alg)).toEqual(["EdDSA", "EdDSA"]);

    const listed = await cliJson<{ items: { slug: string }[] }>(server, "projects", "list", "--json");
    expect(listed.items.map((p) => p.slug).sort()).toEqual(["acme", "default"]);
    const key = (await cli(server, "apikeys", "create", "--project", "acme", "--name", "acme-ci")).stdout.trim();
    const own = (await (await api(server, key, "GET", "/v1/project")).json()) as { id: string };
    expect(own.id).toBe(created.id);
    const kids = await cliJson<{ items: { kid: string }[] }>(server, "keys", "list", "--project", "acme", "--json");
    expect(kids.items.map((k) => k.kid).sort()).toEqual(acmeKeys.keys.map((k) => k.kid as string).sort());
    // By id too, in either case, and the slug in capitals.
    for (const project of [created.id, created.id.toUpperCase(), "ACME"]) {
      expect({ project, kids: (await cliJson<{ items: { kid: string }[] }>(server, "keys", "list", "--project", project, "--json")).items }).toEqual({ project, kids: kids.items });
    }
    expect((await cli(server, "keys", "list", "--project", "nope")).code).toBe(1);
    const duplicate = await cli(server, "projects", "create", "--slug", "acme");
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toContain("acme");
  });
});
