import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { open } from "lmdb";
import { loadConfig } from "../src/config/load.ts";
import { systemClock } from "../src/context.ts";
import { generateMasterKeyText, MasterKeyError } from "../src/keys/master-key.ts";
import { createLogger, silentLogger } from "../src/logging/logger.ts";
import { LMDB_FILE, openLmdbFileReadOnly } from "../src/store/lmdb/lmdb-store.ts";
import { inspectData } from "../src/cli/check.ts";
import { DATA_FORMAT, openContext, StartupError, type OpenContextOptions } from "../src/startup.ts";
import { createProject } from "../src/core/projects.ts";
import { AppError } from "../src/errors.ts";
import { MAX_JWKS_MAX_AGE_S } from "../src/keys/lifecycle.ts";
import { FakeClock, tempDir } from "./helpers/app.ts";

/** Runs `body` with a fresh temp directory, removed afterwards whatever happens. */
async function inTempDir(body: (dir: { path: string }) => Promise<void>): Promise<void> {
  const dir = tempDir();
  try {
    await body(dir);
  } finally {
    dir.remove();
  }
}

/** Settings for a process on `dir` with `masterKey`, ES256, and `overrides`. */
const settingsIn = (dir: string, masterKey: string) => (overrides: Record<string, string> = {}) =>
  loadConfig({ TOKENMINT_DATA_DIR: dir, TOKENMINT_MASTER_KEY: masterKey, TOKENMINT_SIGNING_ALG: "ES256", ...overrides });

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

describe("openContext", () => {
  test("creates the default project, its keys and the format marker on first start", async () => {
    await inTempDir(async (dir) => {
      const config = loadConfig({ TOKENMINT_DATA_DIR: dir.path, TOKENMINT_MASTER_KEY: generateMasterKeyText(), TOKENMINT_SIGNING_ALG: "ES256" });
      const ctx = await openContext(config, silentLogger, systemClock);
      expect(await ctx.store.getMeta<number>("format")).toBe(DATA_FORMAT);
      expect(await ctx.store.getProject(ctx.projectId)).toMatchObject({ id: ctx.projectId, name: "default" });
      expect((await ctx.keys.list(ctx.projectId)).map((k) => k.state)).toEqual(["current", "next"]);
      await ctx.store.close();
    });
  });

  /** Data in `dir` with `count` projects beside the default one, none with keys yet; how to open it again, and their ids. */
  async function projectsWithoutKeys(dir: string, count: number) {
    const clock = new FakeClock();
    const settings = settingsIn(dir, generateMasterKeyText());
    const reopen = (options?: OpenContextOptions) => openContext(settings({ TOKENMINT_BASE_DOMAIN: "tm.example.test" }), silentLogger, clock, options);
    const first = await reopen({ maintainKeys: false });
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push((await createProject(first.store, { slug: `p${i}`, name: `P${i}` }, first.instance, clock.now())).id);
    for (const id of ids) expect(await first.store.getKeySet(id)).toBeUndefined();
    await first.store.close();
    return { reopen, ids };
  }

  test("loads the keys of every project at start, creating the sets of projects that have none yet", async () => {
    await inTempDir(async (dir) => {
      // More projects than are loaded at once.
      const { reopen, ids } = await projectsWithoutKeys(dir.path, 20);
      const ctx = await reopen();
      try {
        for (const id of [ctx.projectId, ...ids]) {
          const stored = await ctx.store.getKeySet(id);
          expect(stored?.keys.map((k) => k.state).sort()).toEqual(["current", "next"]);
          expect(ctx.keys.ring(id).kid).toBe(stored?.keys.find((k) => k.state === "current")?.kid as string);
        }
      } finally {
        await ctx.store.close();
      }
    });
  });

  test("loadKeys false (a server's primary) creates the sets of projects that have none and loads no ring", async () => {
    await inTempDir(async (dir) => {
      const { reopen, ids } = await projectsWithoutKeys(dir.path, 2);
      const ctx = await reopen({ loadKeys: false });
      try {
        for (const id of [ctx.projectId, ...ids]) {
          expect((await ctx.store.getKeySet(id))?.keys.map((k) => k.state).sort()).toEqual(["current", "next"]);
          expect(ctx.keys.has(id)).toBe(false);
        }
      } finally {
        await ctx.store.close();
      }
    });
  });

  test("refuses data of another major format and leaves it untouched", async () => {
    await inTempDir(async (dir) => {
      const masterKey = generateMasterKeyText();
      const config = loadConfig({ TOKENMINT_DATA_DIR: dir.path, TOKENMINT_MASTER_KEY: masterKey, TOKENMINT_SIGNING_ALG: "ES256" });
      const ctx = await openContext(config, silentLogger, systemClock);
      await ctx.store.close();
      // A later release's data: only the format marker differs.
      const db = open({ path: join(dir.path, LMDB_FILE), encoding: "json", compression: false });
      await db.put("meta:format", DATA_FORMAT + 1);
      await db.close();
      const before = sha256(join(dir.path, LMDB_FILE));

      const refusal = await openContext(config, silentLogger, systemClock).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(StartupError);
      expect((refusal as Error).message).toBe(`the data in ${dir.path} has format ${DATA_FORMAT + 1}; this build reads formats 1 and 2`);
      expect(sha256(join(dir.path, LMDB_FILE))).toBe(before);
    });
  });

  test("data of format 1: checked and managed as format 1 by commands; marked 2 by a server once it passed its checks", async () => {
    expect(DATA_FORMAT).toBe(2);
    await inTempDir(async (dir) => {
      const clock = new FakeClock();
      const config = settingsIn(dir.path, generateMasterKeyText())();
      const file = join(dir.path, LMDB_FILE);
      const first = await openContext(config, silentLogger, clock);
      const keys = await first.keys.list(first.projectId);
      await first.store.close();
      const db = open({ path: file, encoding: "json", compression: false });
      await db.put("meta:format", 1);
      await db.close();
      const format = async () => {
        const readOnly = openLmdbFileReadOnly(file);
        try {
          return await readOnly.getMeta<number>("format");
        } finally {
          await readOnly.close();
        }
      };
      const before = sha256(file);

      // check reads it as it is.
      const readOnly = openLmdbFileReadOnly(file);
      try {
        expect(await inspectData(readOnly, config, dir.path)).toMatchObject({ format: 1, masterKey: { opened: 2 } });
      } finally {
        await readOnly.close();
      }
      expect(sha256(file)).toBe(before);

      // A server refused (a wrong master key) changes nothing.
      const wrong = settingsIn(dir.path, generateMasterKeyText())();
      expect(await openContext(wrong, silentLogger, clock).then(() => undefined, (error: unknown) => error)).toBeInstanceOf(MasterKeyError);
      expect(sha256(file)).toBe(before);

      // A command keeps to format 1: a key it retires keeps its private half.
      const lines: string[] = [];
      const logger = createLogger("info", (line) => lines.push(line), clock.now);
      const command = await openContext(config, logger, clock, { maintainKeys: false, loadKeys: false });
      try {
        clock.advance(MAX_JWKS_MAX_AGE_S + 1);
        await command.keys.rotate(command.projectId);
        const set = await command.store.getKeySet(command.projectId);
        expect(set?.keys.find((k) => k.state === "retired")?.sealedPrivateJwk).toBeString();
      } finally {
        await command.store.close();
      }
      expect(await format()).toBe(1);
      expect(lines.filter((line) => line.includes("data format upgraded"))).toEqual([]);

      // A server marks it 2 and logs it once; its first pass drops the retired key's private half.
      const server = await openContext(config, logger, clock);
      try {
        expect(await server.store.getMeta<number>("format")).toBe(2);
        expect((await server.keys.list(server.projectId)).map((k) => k.kid)).toEqual(expect.arrayContaining(keys.map((k) => k.kid)));
        await server.keys.tick();
        expect((await server.store.getKeySet(server.projectId))?.keys.filter((k) => k.sealedPrivateJwk !== undefined).map((k) => k.state).sort()).toEqual(["current", "next"]);
      } finally {
        await server.store.close();
      }
      const said = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(said.filter((line) => line.msg === "data format upgraded")).toEqual([expect.objectContaining({ from: 1, to: 2 })]);
      expect(said.filter((line) => line.msg === "private halves of retired signing keys dropped")).toEqual([expect.objectContaining({ count: 1 })]);
      // Once: the next server finds format 2.
      lines.length = 0;
      const again = await openContext(config, logger, clock);
      await again.store.close();
      expect(lines.filter((line) => line.includes("data format upgraded"))).toEqual([]);
    });
  });
});

describe("projects at <slug>.<base domain>", () => {
  test("cannot be created while the base domain is an IP address (the public URL's host), and data holding them does not start there", async () => {
    await inTempDir(async (dir) => {
      const clock = new FakeClock();
      const settings = settingsIn(dir.path, generateMasterKeyText());
      const byIp = await openContext(settings({ TOKENMINT_PUBLIC_URL: "http://10.0.0.5:8080" }), silentLogger, clock);
      const refused = await createProject(byIp.store, { slug: "acme", name: "Acme" }, byIp.instance, clock.now()).then(() => undefined, (error: unknown) => error);
      expect(refused).toBeInstanceOf(AppError);
      expect((refused as AppError).message).toContain("TOKENMINT_BASE_DOMAIN");
      expect((await byIp.store.listProjects()).map((p) => p.slug ?? "default")).toEqual(["default"]);
      // With a DNS name for the base domain, it can.
      const acme = await createProject(byIp.store, { slug: "acme", name: "Acme" }, { ...byIp.instance, baseDomain: "tm.example.test" }, clock.now());
      await byIp.store.close();

      const failed = await openContext(settings({ TOKENMINT_PUBLIC_URL: "http://10.0.0.5:8080" }), silentLogger, clock).then(() => undefined, (error: unknown) => error);
      expect(failed).toBeInstanceOf(StartupError);
      expect((failed as Error).message).toContain("TOKENMINT_BASE_DOMAIN");
      const ctx = await openContext(settings({ TOKENMINT_PUBLIC_URL: "http://10.0.0.5:8080", TOKENMINT_BASE_DOMAIN: "tm.example.test" }), silentLogger, clock);
      expect(ctx.projects.get(acme.id).url).toBe("http://acme.tm.example.test");
      await ctx.store.close();
    });
  });
});

describe("a CLI command resolves projects as the server does", () => {
  test("with the instance settings of the last server to start on the data, not its own", async () => {
    await inTempDir(async (dir) => {
      const clock = new FakeClock();
      const settings = settingsIn(dir.path, generateMasterKeyText());
      const serverSettings = { TOKENMINT_PUBLIC_URL: "https://auth.example.com", TOKENMINT_KEY_ROTATION_PERIOD: "86400" };
      // The server rotates daily (JWKS max-age 300 s) and signs ES256.
      const server = await openContext(settings(serverSettings), silentLogger, clock);
      const rotatedAt = clock.now();
      await server.store.close();

      // Two minutes later, a CLI run with other settings: RS256, a rotation every minute (max-age 30 s), another URL.
      clock.advance(120);
      const cli = await openContext(
        settings({ TOKENMINT_PUBLIC_URL: "https://cli.example.net", TOKENMINT_SIGNING_ALG: "RS256", TOKENMINT_KEY_ROTATION_PERIOD: "60" }),
        silentLogger,
        clock,
        { maintainKeys: false },
      );
      try {
        expect(cli.instance).toMatchObject({ publicUrl: "https://auth.example.com", signingAlg: "ES256", keyRotationPeriod: 86400 });
        expect(cli.projects.get(cli.projectId)).toMatchObject({ issuer: "https://auth.example.com", signingAlg: "ES256", keyRotationPeriod: 86400 });
        // The next rotation the server will make, a day after the last.
        const before = await cli.keys.list(cli.projectId);
        expect(before.find((k) => k.state === "next")?.activatesAt).toBe(rotatedAt + 86_400_000);

        // Verifiers may cache the server's JWKS for 300 s: the next key is not ready yet.
        const refused = await cli.keys.rotate(cli.projectId).then(() => undefined, (error: unknown) => error);
        expect(refused).toBeInstanceOf(AppError);
        expect((refused as AppError).message).toContain(`JWKS max-age (${MAX_JWKS_MAX_AGE_S} s)`);
        expect(await cli.keys.list(cli.projectId)).toEqual(before);

        // Once it is, the rotation goes ahead, and the key it publishes is of the server's algorithm.
        clock.advance(MAX_JWKS_MAX_AGE_S - 120);
        const rotated = await cli.keys.rotate(cli.projectId);
        expect(rotated.find((k) => k.state === "current")?.kid).toBe(before.find((k) => k.state === "next")?.kid as string);
        expect(rotated.find((k) => k.state === "next")?.alg).toBe("ES256");
      } finally {
        await cli.store.close();
      }
    });
  });

  test("a server records its settings again only when they changed", async () => {
    await inTempDir(async (dir) => {
      const clock = new FakeClock();
      const settings = settingsIn(dir.path, generateMasterKeyText());
      const open = async (overrides: Record<string, string>, options = {}) => {
        const ctx = await openContext(settings(overrides), silentLogger, clock, options);
        const seen = { instance: ctx.instance, seq: await ctx.store.changeSeq() };
        await ctx.store.close();
        return seen;
      };
      const first = await open({ TOKENMINT_KEY_ROTATION_PERIOD: "3600" });
      // The same settings again: nothing is written.
      expect((await open({ TOKENMINT_KEY_ROTATION_PERIOD: "3600" })).seq).toBe(first.seq);
      // Other settings: a CLI command sees them from then on.
      await open({ TOKENMINT_KEY_ROTATION_PERIOD: "7200", TOKENMINT_SIGNING_ALG: "EdDSA" });
      expect((await open({}, { maintainKeys: false })).instance).toMatchObject({ keyRotationPeriod: 7200, signingAlg: "EdDSA" });
    });
  });

  test("on data no server has started on yet, a manual rotation waits the longest JWKS max-age where the period comes from the instance", async () => {
    await inTempDir(async (dir) => {
      const clock = new FakeClock();
      const settings = settingsIn(dir.path, generateMasterKeyText());
      // A CLI command creates the data; project acme sets 120 s itself (max-age 60 s).
      const first = await openContext(settings({ TOKENMINT_KEY_ROTATION_PERIOD: "60" }), silentLogger, clock, { maintainKeys: false });
      const acme = await createProject(first.store, { slug: "acme", name: "Acme", keyRotationPeriod: 120 }, first.instance, clock.now());
      await first.projects.refresh();
      await first.keys.load(acme.id);
      await first.store.close();

      // Two minutes later, its own settings rotate every minute (max-age 30 s), but the server
      // that will serve the data may use any period: verifiers may cache its JWKS for 300 s.
      clock.advance(120);
      const cli = await openContext(settings({ TOKENMINT_KEY_ROTATION_PERIOD: "60" }), silentLogger, clock, { maintainKeys: false });
      try {
        const before = await cli.keys.list(cli.projectId);
        const refused = await cli.keys.rotate(cli.projectId).then(() => undefined, (error: unknown) => error);
        expect(refused).toBeInstanceOf(AppError);
        expect((refused as AppError).message).toContain(`JWKS max-age (${MAX_JWKS_MAX_AGE_S} s)`);
        expect(await cli.keys.list(cli.projectId)).toEqual(before);

        // acme's period is stored with it: the CLI knows its max-age, and the rotation goes ahead.
        const next = (await cli.keys.list(acme.id)).find((k) => k.state === "next")?.kid;
        const rotated = await cli.keys.rotate(acme.id);
        expect(rotated.find((k) => k.state === "current")?.kid).toBe(next);

        // Once the next key has been published for 300 s, the default project rotates too.
        clock.advance(MAX_JWKS_MAX_AGE_S - 120);
        const nextDefault = before.find((k) => k.state === "next")?.kid;
        expect((await cli.keys.rotate(cli.projectId)).find((k) => k.state === "current")?.kid).toBe(nextDefault);
      } finally {
        await cli.store.close();
      }
    });
  });
});
