import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { open } from "lmdb";
import { loadConfig } from "../src/config/load.ts";
import { systemClock } from "../src/context.ts";
import { generateMasterKeyText } from "../src/keys/master-key.ts";
import { silentLogger } from "../src/logging/logger.ts";
import { LMDB_FILE } from "../src/store/lmdb/lmdb-store.ts";
import { DATA_FORMAT, openContext, StartupError } from "../src/startup.ts";
import { createProject } from "../src/core/projects.ts";
import { AppError } from "../src/errors.ts";
import { MAX_JWKS_MAX_AGE_S } from "../src/keys/lifecycle.ts";
import { FakeClock, tempDir } from "./helpers/app.ts";

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

describe("openContext", () => {
  test("creates the default project, its keys and the format marker on first start", async () => {
    const dir = tempDir();
    try {
      const config = loadConfig({ TOKENMINT_DATA_DIR: dir.path, TOKENMINT_MASTER_KEY: generateMasterKeyText(), TOKENMINT_SIGNING_ALG: "ES256" });
      const ctx = await openContext(config, silentLogger, systemClock);
      expect(await ctx.store.getMeta<number>("format")).toBe(DATA_FORMAT);
      expect(await ctx.store.getProject(ctx.projectId)).toMatchObject({ id: ctx.projectId, name: "default" });
      expect((await ctx.keys.list(ctx.projectId)).map((k) => k.state)).toEqual(["current", "next"]);
      await ctx.store.close();
    } finally {
      dir.remove();
    }
  });

  test("refuses data of another major format and leaves it untouched", async () => {
    const dir = tempDir();
    try {
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
      expect((refusal as Error).message).toBe(`the data in ${dir.path} has format ${DATA_FORMAT + 1}; this build reads format ${DATA_FORMAT}`);
      expect(sha256(join(dir.path, LMDB_FILE))).toBe(before);
    } finally {
      dir.remove();
    }
  });
});

describe("a CLI command's manual rotation", () => {
  test("waits the longest JWKS max-age a server serves when the period comes from the instance, and the project's own max-age otherwise", async () => {
    const dir = tempDir();
    try {
      const masterKey = generateMasterKeyText();
      const clock = new FakeClock();
      const settings = (period: string) =>
        loadConfig({ TOKENMINT_DATA_DIR: dir.path, TOKENMINT_MASTER_KEY: masterKey, TOKENMINT_SIGNING_ALG: "ES256", TOKENMINT_KEY_ROTATION_PERIOD: period });
      // The server rotates daily: its JWKS max-age is 300 s. Project acme sets 120 s itself (max-age 60 s).
      const server = await openContext(settings("86400"), silentLogger, clock);
      expect(server.keys.jwksMaxAge(server.projectId)).toBe(MAX_JWKS_MAX_AGE_S);
      const acme = await createProject(server.store, { slug: "acme", name: "Acme", keyRotationPeriod: 120 }, server.config, clock.now());
      await server.projects.refresh();
      await server.keys.load(acme.id);
      await server.store.close();

      // Two minutes later, a CLI whose own settings rotate every minute (max-age 30 s) cannot know
      // the server's period: verifiers may cache the JWKS for 300 s, so the next key is not ready.
      clock.advance(120);
      const cli = await openContext(settings("60"), silentLogger, clock, { maintainKeys: false });
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
    } finally {
      dir.remove();
    }
  });
});
