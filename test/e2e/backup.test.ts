/**
 * `tokenmint backup FILE` and `tokenmint restore FILE` on real processes: a backup taken while the
 * server runs restores to the same keys and clients; restore refuses (changing nothing) while a
 * server runs, for a file that is not tokenmint data, and for the wrong master key; backup never
 * overwrites a file.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLocalJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify, SignJWT, type JSONWebKeySet } from "jose";
import { open } from "lmdb";
import { api, cleanup, createApiKeyWithCli, freePort, newMasterKey, processEnv, runTokenmint, startServer, tempDataDir, type CliResult, type Server } from "./process.ts";

afterEach(cleanup);

const sha256 = (path: string) => new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");

/** Exit code 1 and exactly one stderr line; returns that line. */
function refusal(result: CliResult): string {
  expect(result.code).toBe(1);
  expect(result.stderrLines).toHaveLength(1);
  expect(result.stdout).toBe("");
  return result.stderrLines[0] as string;
}

/** Settings for a CLI run on `dataDir` without a server. */
const cliEnv = (dataDir: string, masterKey: string) => processEnv({ TOKENMINT_DATA_DIR: dataDir, TOKENMINT_MASTER_KEY: masterKey, TOKENMINT_SIGNING_ALG: "ES256" });

/** A data directory with data in it, made by a CLI command (no server). */
async function seededDataDir(masterKey: string): Promise<string> {
  const dataDir = tempDataDir();
  const seeded = await runTokenmint(["apikeys", "create", "--name", "seed"], cliEnv(dataDir, masterKey));
  expect(seeded.code).toBe(0);
  return dataDir;
}

/** The data directory's files and the data file's hash: what "nothing changed" compares. */
const snapshot = (dataDir: string) => ({ files: readdirSync(dataDir).sort(), data: sha256(join(dataDir, "tokenmint.mdb")) });

describe("backup and restore", () => {
  test("round trip: backup while serving, wipe the data, restore, serve again: same JWKS and clients", async () => {
    const server = await startServer();
    const { dataDir, env } = server;
    const apiKey = await createApiKeyWithCli(server);
    const provider = (await (await api(server, apiKey, "POST", "/v1/providers", { name: "payments" })).json()) as { id: string };
    const created = await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients`, { name: "billing", audience: "https://billing.test" });
    expect(created.status).toBe(201);
    const client = (await created.json()) as { id: string };
    const clientPath = `/v1/providers/${provider.id}/clients/${client.id}`;
    const clientBefore = await (await api(server, apiKey, "GET", clientPath)).text();
    const jwksBefore = await (await fetch(`${server.url}/.well-known/jwks`)).text();

    const file = join(tempDataDir(), "tokenmint-backup.mdb");
    const backup = await runTokenmint(["backup", file, "--json"], env);
    expect(backup.code).toBe(0);
    expect(JSON.parse(backup.stdout)).toEqual({ file, bytes: statSync(file).size });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // Sealed keys only: no private JWK member is in the file in the clear.
    expect(readFileSync(file, "latin1")).not.toMatch(/"d":"/);
    expect(await server.proc.stop()).toBe(0);

    rmSync(join(dataDir, "tokenmint.mdb"));
    rmSync(join(dataDir, "tokenmint.mdb-lock"), { force: true });
    const restored = await runTokenmint(["restore", file], env);
    expect(restored.code).toBe(0);
    expect(restored.stdout).toBe(`Restored ${file} to ${join(dataDir, "tokenmint.mdb")} (${statSync(file).size} bytes, data format 2); start the server to use it.`);
    expect(readdirSync(dataDir).filter((name) => name.startsWith("."))).toEqual([]);

    const again = await startServer({ dataDir, masterKey: env.TOKENMINT_MASTER_KEY as string });
    expect(await (await fetch(`${again.url}/.well-known/jwks`)).text()).toBe(jwksBefore);
    const clientAfter = await api(again, apiKey, "GET", clientPath);
    expect(clientAfter.status).toBe(200);
    expect(await clientAfter.text()).toBe(clientBefore);
  });

  test("after a restore, the server sees a CLI change from its next request on, as before", async () => {
    const settings = { TOKENMINT_PUBLIC_URL: "https://tm.example.test" };
    const first = await startServer({ settings });
    const { dataDir, env } = first;
    const apiKey = await createApiKeyWithCli(first, "kept");
    const file = join(tempDataDir(), "tokenmint-backup.mdb");
    expect((await runTokenmint(["backup", file], env)).code).toBe(0);
    // One more write after the backup: the restored data is one change behind what was announced.
    await createApiKeyWithCli(first, "later");
    expect(await first.proc.stop()).toBe(0);
    expect((await runTokenmint(["restore", file], env)).code).toBe(0);
    // The restore removed the old lock file; LMDB adds one beside data that has none, the owner's alone.
    const lockFile = join(dataDir, "tokenmint.mdb-lock");
    expect(existsSync(lockFile)).toBe(false);
    expect((await runTokenmint(["check"], env)).code).toBe(0);
    expect(statSync(lockFile).mode & 0o777).toBe(0o600);

    // The same settings (public URL included): the start itself writes nothing.
    const again = await startServer({ dataDir, masterKey: env.TOKENMINT_MASTER_KEY as string, settings });
    expect((await api(again, apiKey, "GET", "/v1/providers")).status).toBe(200);
    const listed = JSON.parse((await runTokenmint(["apikeys", "list", "--json"], env)).stdout) as { items: { id: string; name: string }[] };
    expect((await runTokenmint(["apikeys", "revoke", listed.items.find((k) => k.name === "kept")?.id as string], env)).code).toBe(0);
    expect((await api(again, apiKey, "GET", "/v1/providers")).status).toBe(401);
    expect(await again.proc.stop()).toBe(0);
  }, 20_000);

  test("a restore keeps the newer signing keys and every revocation made since the backup", async () => {
    // One issuer for both servers (by default it names the port, which changes).
    const settings = { TOKENMINT_PUBLIC_URL: "https://tm.example.test" };
    const server = await startServer({ settings });
    const { dataDir, env } = server;
    const apiKey = await createApiKeyWithCli(server, "main");
    const leaked = await createApiKeyWithCli(server, "leaked");
    const provider = (await (await api(server, apiKey, "POST", "/v1/providers", { name: "payments" })).json()) as { id: string };
    const clientPath = async (name: string) => {
      const client = (await (await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients`, { name, audience: "urn:billing" })).json()) as { id: string };
      const { secret } = (await (await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients/${client.id}/secrets`)).json()) as { secret: string };
      return { path: `/v1/providers/${provider.id}/clients/${client.id}`, basic: `Basic ${btoa(`${client.id}:${encodeURIComponent(secret)}`)}` };
    };
    const [billing, reports] = [await clientPath("billing"), await clientPath("reports")];
    const issue = async (s: Server, path: string) => ((await (await api(s, apiKey, "POST", `${path}/tokens`, {})).json()) as { accessToken: string }).accessToken;
    const oauth = (s: Server, endpoint: string, basic: string, token: string) =>
      fetch(`${s.url}/oauth/${endpoint}`, { method: "POST", headers: { authorization: basic, "content-type": "application/x-www-form-urlencoded" }, body: `token=${token}` });
    const beforeBackup = await issue(server, reports.path);
    // billing also authenticates with a key (private_key_jwt).
    const clientKey = await generateKeyPair("ES256");
    const billingId = billing.path.split("/").at(-1) as string;
    expect((await api(server, apiKey, "PUT", `${billing.path}/jwks`, { keys: [{ ...(await exportJWK(clientKey.publicKey)), kid: "k1" }] })).status).toBe(200);
    const file = join(tempDataDir(), "backup.mdb");
    expect((await runTokenmint(["backup", file], env)).code).toBe(0);

    // After the backup: the current key is revoked twice (a compromise), so a key the backup
    // lacks signs; an API key, a token and all of a client's tokens are revoked; a provider is
    // added, which the restore takes back.
    const keys = async () => (JSON.parse((await runTokenmint(["keys", "list", "--json"], env)).stdout) as { items: { kid: string; state: string }[] }).items;
    const revoked: string[] = [];
    for (let i = 0; i < 2; i++) {
      const current = (await keys()).find((k) => k.state === "current")?.kid as string;
      expect((await runTokenmint(["keys", "revoke", current], env)).code).toBe(0);
      revoked.push(current);
    }
    const leakedId = (JSON.parse((await runTokenmint(["apikeys", "list", "--json"], env)).stdout) as { items: { id: string; name: string }[] }).items.find((k) => k.name === "leaked")?.id;
    expect((await runTokenmint(["apikeys", "revoke", leakedId as string], env)).code).toBe(0);
    await api(server, apiKey, "POST", "/v1/providers", { name: "later" });
    const kept = await issue(server, billing.path);
    const signer = decodeProtectedHeader(kept).kid as string;
    expect(revoked).not.toContain(signer);
    // An assertion used after the backup: single-use, before the restore and after it.
    const assertion = await new SignJWT({ jti: crypto.randomUUID() })
      .setProtectedHeader({ alg: "ES256", kid: "k1" })
      .setIssuer(billingId)
      .setSubject(billingId)
      .setAudience(settings.TOKENMINT_PUBLIC_URL)
      .setIssuedAt()
      .setExpirationTime("120s")
      .sign(clientKey.privateKey);
    const assertionGrant = (s: Server) =>
      fetch(`${s.url}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "client_credentials", client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", client_assertion: assertion }),
      });
    expect((await assertionGrant(server)).status).toBe(200);
    const withdrawn = await issue(server, billing.path);
    expect((await oauth(server, "revoke", billing.basic, withdrawn)).status).toBe(200);
    expect((await api(server, apiKey, "POST", `${reports.path}/revoke-tokens`)).status).toBe(200);
    const jwksBefore = await (await fetch(`${server.url}/.well-known/jwks`)).text();
    expect(await server.proc.stop()).toBe(0);

    const restored = await runTokenmint(["restore", file, "--json"], env);
    expect(restored.code).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ file, kept: { signingKeys: 1, revocations: 3 } });
    expect(restored.stderrLines).toEqual([
      "Kept from the data replaced: the signing keys of 1 project(s) where newer than the backup's, and 3 revocation(s) of signing keys, API keys, tokens and clients' tokens made since the backup.",
    ]);

    const again = await startServer({ dataDir, masterKey: env.TOKENMINT_MASTER_KEY as string, settings });
    const jwks = (await (await fetch(`${again.url}/.well-known/jwks`)).json()) as JSONWebKeySet;
    expect(JSON.stringify(jwks)).toBe(jwksBefore);
    expect(jwks.keys.map((k) => k.kid)).not.toContain(revoked[0]);
    await jwtVerify(kept, createLocalJWKSet(jwks), { audience: "urn:billing", issuer: settings.TOKENMINT_PUBLIC_URL });
    // The revocations hold: the API key, the token, the client's earlier tokens.
    expect((await api(again, leaked, "GET", "/v1/providers")).status).toBe(401);
    const active = async (basic: string, token: string) => ((await (await oauth(again, "introspect", basic, token)).json()) as { active: boolean }).active;
    expect(await active(billing.basic, kept)).toBe(true);
    expect(await active(billing.basic, withdrawn)).toBe(false);
    expect(await active(reports.basic, beforeBackup)).toBe(false);
    // The assertion used since the backup stays used.
    const replay = await assertionGrant(again);
    expect({ status: replay.status, body: await replay.json() }).toMatchObject({ status: 401, body: { error: "invalid_client", error_description: expect.stringContaining("already used") } });
    // The rest is the backup's: the provider added after it is gone; the client signs with the kept key.
    const providers = (await (await api(again, apiKey, "GET", "/v1/providers")).json()) as { items: { name: string }[] };
    expect(providers.items.map((p) => p.name)).toEqual(["payments"]);
    expect(decodeProtectedHeader(await issue(again, billing.path)).kid).toBe(signer);
    expect(await again.proc.stop()).toBe(0);
  }, 30_000);

  test("restored onto older data of the same instance (a standby), the backup's newer keys are taken", async () => {
    const masterKey = newMasterKey();
    const primary = cliEnv(await seededDataDir(masterKey), masterKey);
    const [older, newer] = [join(tempDataDir(), "older.mdb"), join(tempDataDir(), "newer.mdb")];
    expect((await runTokenmint(["backup", older], primary)).code).toBe(0);
    const list = async (env: Record<string, string>) => (JSON.parse((await runTokenmint(["keys", "list", "--json"], env)).stdout) as { items: { kid: string; state: string }[] }).items;
    const current = (await list(primary)).find((k) => k.state === "current")?.kid as string;
    expect((await runTokenmint(["keys", "revoke", current], primary)).code).toBe(0);
    expect((await runTokenmint(["backup", newer], primary)).code).toBe(0);

    const standby = cliEnv(tempDataDir(), masterKey);
    expect((await runTokenmint(["restore", older], standby)).code).toBe(0);
    const restored = await runTokenmint(["restore", newer, "--json"], standby);
    expect(restored.code).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ kept: { signingKeys: 0, revocations: 0 } });
    expect(restored.stderrLines).toEqual([]);
    expect(await list(standby)).toEqual(await list(primary));
    expect((await list(standby)).map((k) => k.kid)).not.toContain(current);
  }, 30_000);

  test("restore is refused while a server serves the data directory, and nothing changes", async () => {
    const server = await startServer();
    const file = join(tempDataDir(), "backup.mdb");
    expect((await runTokenmint(["backup", file], server.env)).code).toBe(0);
    const before = snapshot(server.dataDir);

    const line = refusal(await runTokenmint(["restore", file, "--json"], server.env));
    expect(line).toMatch(new RegExp(`server \\(pid ${server.proc.pid}\\) is serving ${server.dataDir}`));
    expect(snapshot(server.dataDir)).toEqual(before);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });

  test("restore refuses a file that is not tokenmint data and a backup the master key does not open", async () => {
    const masterKey = newMasterKey();
    const dataDir = await seededDataDir(masterKey);
    const before = snapshot(dataDir);
    const dir = tempDataDir();

    const junk = join(dir, "junk.mdb");
    writeFileSync(junk, "not a database\n".repeat(1000));
    expect(refusal(await runTokenmint(["restore", junk], cliEnv(dataDir, masterKey)))).toBe(`tokenmint: ${junk} is not a tokenmint backup: it is not an LMDB data file`);

    // A valid LMDB file of some other program.
    const foreign = join(dir, "foreign.mdb");
    const db = open({ path: foreign, encoding: "json" });
    await db.put("hello", "world");
    await db.close();
    expect(refusal(await runTokenmint(["restore", foreign], cliEnv(dataDir, masterKey)))).toMatch(/holds no tokenmint data/);

    const file = join(dir, "other-key.mdb");
    const otherKey = newMasterKey();
    expect((await runTokenmint(["backup", file], cliEnv(await seededDataDir(otherKey), otherKey))).code).toBe(0);
    const line = refusal(await runTokenmint(["restore", file], cliEnv(dataDir, masterKey)));
    expect(line).toMatch(/does not match the signing keys in the backup/);
    expect(line).not.toContain(masterKey);

    // Into a directory that does not exist yet: refused without creating it.
    const fresh = join(dir, "fresh");
    refusal(await runTokenmint(["restore", file], cliEnv(fresh, masterKey)));
    expect(existsSync(fresh)).toBe(false);
    expect(snapshot(dataDir)).toEqual(before);
  });

  test("restore says what it meets in words of its own: a data directory that is a file, a backup without its master key, replaced data under another key", async () => {
    const masterKey = newMasterKey();
    const source = await seededDataDir(masterKey);
    const file = join(tempDataDir(), "backup.mdb");
    expect((await runTokenmint(["backup", file], cliEnv(source, masterKey))).code).toBe(0);

    const notDir = join(tempDataDir(), "a-file");
    writeFileSync(notDir, "x");
    expect(refusal(await runTokenmint(["restore", file], cliEnv(notDir, masterKey)))).toBe(`tokenmint: the data directory ${notDir} is not a directory (nothing was changed)`);

    // No master key anywhere: it is the backup that holds sealed keys, not the (new) directory.
    const fresh = join(tempDataDir(), "fresh");
    const { TOKENMINT_MASTER_KEY: _key, ...withoutKey } = cliEnv(fresh, masterKey);
    expect(refusal(await runTokenmint(["restore", file], withoutKey))).toMatch(new RegExp(`but the backup ${file.replace(/[.]/g, "\\.")} holds sealed signing keys`));
    expect(existsSync(fresh)).toBe(false);

    // Data under another master key is replaced; its keys cannot be kept, and the note says why.
    const otherKey = newMasterKey();
    const other = await seededDataDir(otherKey);
    const restored = await runTokenmint(["restore", file], cliEnv(other, masterKey));
    expect(restored.code).toBe(0);
    expect(restored.stderrLines).toEqual([
      "The data replaced could not be read (the configured master key does not open its signing keys): the backup's signing keys are used, tokens signed by keys made since no longer verify, and revocations made since are undone.",
    ]);
  });

  test("data LMDB finds damaged: every command and serve name the file and the way back; after a restore, check finds the data sound", async () => {
    const masterKey = newMasterKey();
    const dataDir = await seededDataDir(masterKey);
    const env = cliEnv(dataDir, masterKey);
    const file = join(tempDataDir(), "before-damage.mdb");
    expect((await runTokenmint(["backup", file], env)).code).toBe(0);
    // Every page but the two meta pages zeroed: the tree's root is no B-tree page any more.
    const data = join(dataDir, "tokenmint.mdb");
    const bytes = readFileSync(data);
    bytes.fill(0, 2 * 4096);
    writeFileSync(data, bytes);

    const damaged = `tokenmint: ${data} is damaged (MDB_CORRUPTED: Located page was wrong type): stop the server and restore a backup (tokenmint restore FILE)`;
    for (const args of [["check"], ["keys", "list"], ["apikeys", "create", "--name", "more"], ["serve"]]) {
      const result = await runTokenmint(args, { ...env, TOKENMINT_WORKERS: "1", TOKENMINT_PORT: String(await freePort()) });
      expect({ args, code: result.code, last: result.stderrLines.at(-1) }).toEqual({ args, code: 1, last: damaged });
      // LMDB itself may print one line of its own before ours; nothing else is said.
      expect(result.stderrLines.length).toBeLessThanOrEqual(2);
      expect(result.stdout).toBe("");
    }

    const restored = await runTokenmint(["restore", file], env);
    expect(restored.code).toBe(0);
    // Nothing of the damaged data can be kept: the backup's keys are used, and the note says so.
    expect(restored.stderrLines.at(-1)).toMatch(/^The data replaced could not be read \(.*MDB_CORRUPTED.*\): the backup's signing keys are used/);
    const check = await runTokenmint(["check"], env);
    expect(check.code).toBe(0);
    expect(check.stdout).toContain("tokenmint check: ok");
  });

  test("backup never overwrites a file and refuses an empty data directory; usage errors exit 2", async () => {
    const masterKey = newMasterKey();
    const dataDir = await seededDataDir(masterKey);
    const env = cliEnv(dataDir, masterKey);
    const dir = tempDataDir();

    const file = join(dir, "backup.mdb");
    const made = await runTokenmint(["backup", file], env);
    expect(made.code).toBe(0);
    expect(made.stdout).toBe(`Backed up ${dataDir} to ${file} (${statSync(file).size} bytes)`);
    const hash = sha256(file);
    expect(refusal(await runTokenmint(["backup", file], env))).toMatch(/already exists/);
    expect(sha256(file)).toBe(hash);

    const existing = join(dir, "notes.txt");
    writeFileSync(existing, "keep me");
    expect(refusal(await runTokenmint(["backup", existing, "--json"], env))).toMatch(/already exists/);
    expect(readFileSync(existing, "utf8")).toBe("keep me");

    const empty = tempDataDir();
    expect(refusal(await runTokenmint(["backup", join(dir, "nothing.mdb")], cliEnv(empty, masterKey)))).toBe(`tokenmint: no data yet in ${empty}`);
    expect(readdirSync(empty)).toEqual([]);
    expect(readdirSync(dir).sort()).toEqual(["backup.mdb", "notes.txt"]);

    // A directory is not overwritten either.
    expect(refusal(await runTokenmint(["backup", dir], env))).toBe(`tokenmint: ${dir} already exists; backup never overwrites a file or directory, choose a new file name`);
    for (const args of [["backup"], ["restore"], ["backup", "a", "b"], ["backup", ""], ["restore", " "]]) {
      const usage = await runTokenmint(args, env);
      expect(usage.code).toBe(2);
      expect(usage.stderrLines).toHaveLength(1);
    }
  });

  test("help: the main help lists backup, restore and check; each has its own help", async () => {
    const env = processEnv({});
    const main = await runTokenmint(["--help"], env);
    expect(main.code).toBe(0);
    for (const command of ["backup FILE", "restore FILE", "check"]) expect(main.stdout).toContain(`  ${command}`);
    const helps = await Promise.all(["backup", "restore", "check"].map((command) => runTokenmint([command, "--help"], env)));
    for (const [i, command] of ["backup", "restore", "check"].entries()) {
      expect(helps[i]?.code).toBe(0);
      expect(helps[i]?.stdout).toStartWith(`Usage: tokenmint ${command}`);
    }
    expect(helps[0]?.stdout).toMatch(/master key separately/);
  });
});
