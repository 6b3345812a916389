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
import { tempDir } from "./helpers/app.ts";

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
