/**
 * `tokenmint check` on real processes: it validates settings, data format and master key, shows
 * the default project's keys, and writes nothing, whether a server runs beside it or not.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { JSONWebKeySet } from "jose";
import { cleanup, newMasterKey, processEnv, runTokenmint, startServer, tempDataDir, type CliResult } from "./process.ts";

afterEach(cleanup);

const sha256 = (path: string) => new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");

/** Exit code 1, nothing on stdout and exactly one stderr line; returns that line. */
function refusal(result: CliResult): string {
  expect(result.code).toBe(1);
  expect(result.stdout).toBe("");
  expect(result.stderrLines).toHaveLength(1);
  return result.stderrLines[0] as string;
}

const cliEnv = (dataDir: string, settings: Record<string, string | undefined>) => processEnv({ TOKENMINT_DATA_DIR: dataDir, TOKENMINT_SIGNING_ALG: "ES256", ...settings });

interface CheckJson {
  ok: boolean;
  issuer: string;
  currentKid: string;
  nextRotation: string | null;
  server: { pid: number } | null;
  masterKey: { source: string; signingKeys: number; mode?: string };
  keys: { kid: string; alg: string; state: string; activatesAt?: string }[];
}

describe("check", () => {
  test("ok beside a running server and after it stopped: shows the current kid, changes nothing", async () => {
    const server = await startServer({ settings: { TOKENMINT_KEY_ROTATION_PERIOD: "3600" } });
    const jwks = (await (await fetch(`${server.url}/.well-known/jwks`)).json()) as JSONWebKeySet;

    const json = await runTokenmint(["check", "--json"], server.env);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout) as CheckJson;
    expect(report.ok).toBe(true);
    expect(report.server).toEqual({ pid: server.proc.pid });
    expect(report.masterKey).toEqual({ source: "TOKENMINT_MASTER_KEY", signingKeys: 2 });
    expect(report.keys.map((k) => k.state)).toEqual(["current", "next"]);
    expect(report.keys.map((k) => k.kid)).toEqual(jwks.keys.map((k) => k.kid as string));
    expect(report.currentKid).toBe(report.keys[0]?.kid as string);
    expect(report.nextRotation).toBe(report.keys[1]?.activatesAt as string);
    expect(json.stdout).not.toContain(server.env.TOKENMINT_MASTER_KEY as string);
    expect(await server.proc.stop()).toBe(0);

    const dataFile = join(server.dataDir, "tokenmint.mdb");
    const before = { files: readdirSync(server.dataDir).sort(), data: sha256(dataFile) };
    const human = await runTokenmint(["check"], server.env);
    expect(human.code).toBe(0);
    expect(human.stdout).toStartWith("tokenmint check: ok\n");
    expect(human.stdout).toContain(`current key   ${report.currentKid} (ES256`);
    expect(human.stdout).toContain("server        not running");
    expect({ files: readdirSync(server.dataDir).sort(), data: sha256(dataFile) }).toEqual(before);

    // Run with other settings than the server's, it still shows the server's issuer and next rotation.
    const otherEnv = { ...server.env, TOKENMINT_KEY_ROTATION_PERIOD: "60", TOKENMINT_PUBLIC_URL: "https://elsewhere.example.net" };
    const other = await runTokenmint(["check", "--json"], otherEnv);
    expect(other.code).toBe(0);
    expect(JSON.parse(other.stdout)).toMatchObject({ issuer: report.issuer, nextRotation: report.nextRotation });
    const listed = await runTokenmint(["keys", "list", "--json"], otherEnv);
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as { items: { activatesAt?: string }[] }).items.map((k) => k.activatesAt)).toEqual(report.keys.map((k) => k.activatesAt));
    expect({ files: readdirSync(server.dataDir).sort(), data: sha256(dataFile) }).toEqual(before);
  });

  test("a master key file others may read passes with the warning serve gives", async () => {
    const server = await startServer();
    expect(await server.proc.stop()).toBe(0);
    const file = join(tempDataDir(), "master-key");
    writeFileSync(file, server.env.TOKENMINT_MASTER_KEY as string, { mode: 0o644 });
    chmodSync(file, 0o644);
    const { TOKENMINT_MASTER_KEY: _inline, ...rest } = server.env;
    const env = { ...rest, TOKENMINT_MASTER_KEY_FILE: file };
    const human = await runTokenmint(["check"], env);
    expect(human.code).toBe(0);
    expect(human.stderrLines).toEqual([
      `tokenmint: warning: the master key file ${file} (mode 0644) can be read or changed by other users; make it readable by the service only (chmod 600, or 640 for its group)`,
    ]);
    const json = await runTokenmint(["check", "--json"], env);
    expect((JSON.parse(json.stdout) as CheckJson).masterKey).toEqual({ source: file, signingKeys: 2, mode: "0644" });
    chmodSync(file, 0o600);
    const tight = await runTokenmint(["check"], env);
    expect({ code: tight.code, stderr: tight.stderrLines }).toEqual({ code: 0, stderr: [] });
  });

  test("a wrong or missing master key fails with one line and generates nothing", async () => {
    const dataDir = tempDataDir();
    const masterKey = newMasterKey();
    expect((await runTokenmint(["apikeys", "create", "--name", "seed"], cliEnv(dataDir, { TOKENMINT_MASTER_KEY: masterKey }))).code).toBe(0);
    const before = sha256(join(dataDir, "tokenmint.mdb"));

    const wrongKey = newMasterKey();
    const wrong = refusal(await runTokenmint(["check", "--json"], cliEnv(dataDir, { TOKENMINT_MASTER_KEY: wrongKey })));
    expect(wrong).toBe(`tokenmint: the master key from TOKENMINT_MASTER_KEY does not match the signing keys in ${dataDir}; nothing was changed`);
    expect(wrong).not.toContain(wrongKey);

    expect(refusal(await runTokenmint(["check"], cliEnv(dataDir, {})))).toMatch(/no master key found/);
    expect(existsSync(join(dataDir, "master.key"))).toBe(false);
    expect(sha256(join(dataDir, "tokenmint.mdb"))).toBe(before);
  });

  test("a TOKENMINT_LOG_FILE that serve could not write fails, as serve would, and nothing is created", async () => {
    const server = await startServer();
    expect(await server.proc.stop()).toBe(0);
    const aFile = join(tempDataDir(), "plain-file");
    writeFileSync(aFile, "");
    const aDirectory = tempDataDir();
    for (const logFile of [aDirectory, join(aFile, "logs", "tokenmint.log")]) {
      const start = `tokenmint: invalid settings: TOKENMINT_LOG_FILE: cannot write log files beside ${logFile}: `;
      const result = await runTokenmint(["check"], { ...server.env, TOKENMINT_LOG_FILE: logFile });
      expect({ logFile, starts: refusal(result).startsWith(start) }).toEqual({ logFile, starts: true });
      const served = await runTokenmint(["serve"], { ...server.env, TOKENMINT_LOG_FILE: logFile });
      expect({ logFile, code: served.code, starts: served.stderrLines[0]?.startsWith(start) }).toEqual({ logFile, code: 1, starts: true });
    }
    expect(readdirSync(aDirectory)).toEqual([]);
  });

  test("bad settings fail with one line naming each problem", async () => {
    const line = refusal(await runTokenmint(["check"], cliEnv(tempDataDir(), { TOKENMINT_SIGNING_ALG: "HS256", TOKENMINT_PORT: "70000" })));
    expect(line).toStartWith("tokenmint: invalid settings: ");
    expect(line).toContain("TOKENMINT_SIGNING_ALG");
    expect(line).toContain("TOKENMINT_PORT");
  });

  test("an empty or missing data directory: 'no data yet', and no file or directory is created", async () => {
    const empty = tempDataDir();
    expect(refusal(await runTokenmint(["check"], cliEnv(empty, {})))).toBe(`tokenmint: no data yet in ${empty}`);
    expect(readdirSync(empty)).toEqual([]);

    const missing = join(tempDataDir(), "not-there");
    expect(refusal(await runTokenmint(["check", "--json"], cliEnv(missing, { TOKENMINT_MASTER_KEY: newMasterKey() })))).toBe(`tokenmint: no data yet in ${missing}`);
    expect(existsSync(missing)).toBe(false);
  });

  test("a data directory that cannot be read is named with the reason, never taken for 'no data yet'", async () => {
    const file = join(tempDataDir(), "a-file");
    writeFileSync(file, "not a directory");
    const reason = `tokenmint: cannot read ${join(file, "tokenmint.mdb")}: a part of the path is not a directory`;
    expect(refusal(await runTokenmint(["check"], cliEnv(file, { TOKENMINT_MASTER_KEY: newMasterKey() })))).toBe(reason);
    expect(refusal(await runTokenmint(["keys", "list"], cliEnv(file, { TOKENMINT_MASTER_KEY: newMasterKey() })))).toBe(reason);
    expect(readFileSync(file, "utf8")).toBe("not a directory");
  });
});
