/**
 * Several processes on one data file each run the key maintenance timer, as the workers of
 * `serve` do: still exactly one rotation per period. Each child (rotation-worker-child.ts) runs a
 * KeyService with a clock this test sets, and all of them tick at the same instant each round,
 * so they race for every rotation; the compare-and-swap on the key set lets one win.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { KeyService } from "../../src/keys/key-service.ts";
import { decodeMasterKey, generateMasterKeyText } from "../../src/keys/master-key.ts";
import { importMasterKey } from "../../src/keys/sealing.ts";
import { SignerFactory } from "../../src/keys/signers/factory.ts";
import { silentLogger } from "../../src/logging/logger.ts";
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import type { KeySetRecord } from "../../src/store/store.ts";
import { T0, tempDir } from "../helpers/app.ts";
import { newProjectId } from "../store/fixtures.ts";

const PERIOD_S = 60;
const PROCESSES = 3;
const ROUNDS = 4;

/** One child and the lines it printed since the last round. */
interface Child {
  proc: Subprocess<"pipe", "pipe", "inherit">;
  lines: string[];
  /** Resolves once `ticked` has been printed `count` times. */
  ticked(count: number): Promise<void>;
}

function startChild(args: string[]): Child {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "rotation-worker-child.ts"), ...args], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const lines: string[] = [];
  let ticks = 0;
  const waiters: { count: number; resolve: () => void }[] = [];
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of proc.stdout) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let nl = buffer.indexOf("\n"); nl !== -1; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line !== "ticked") lines.push(line);
        else ticks++;
        for (const w of waiters.filter((w) => ticks >= w.count)) w.resolve();
      }
    }
  })();
  return {
    proc,
    lines,
    ticked: (count) => (ticks >= count ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve }))),
  };
}

describe("key rotation with several processes on one data file", () => {
  const dir = tempDir("tokenmint-rotation-");
  const masterKeyText = generateMasterKeyText();
  const projectId = newProjectId(T0);
  let children: Child[] = [];
  let rounds = 0;

  /** Every child ticks at `now`; returns the rotation lines they logged. */
  async function tickAll(now: number): Promise<string[]> {
    rounds++;
    for (const child of children) {
      child.lines.length = 0;
      child.proc.stdin.write(`tick ${now}\n`);
      await child.proc.stdin.flush();
    }
    await Promise.all(children.map((child) => child.ticked(rounds)));
    return children.flatMap((child) => child.lines).filter((line) => (JSON.parse(line) as { msg: string }).msg === "signing key rotated");
  }

  async function keySet(): Promise<KeySetRecord> {
    const store = openLmdbStore(dir.path);
    try {
      return (await store.getKeySet(projectId)) as KeySetRecord;
    } finally {
      await store.close();
    }
  }

  beforeAll(async () => {
    const store = openLmdbStore(dir.path);
    const keys = new KeyService({
      store,
      masterKey: await importMasterKey(decodeMasterKey(masterKeyText, "test")),
      now: () => T0,
      logger: silentLogger,
      signingAlg: "ES256",
      rotationPeriod: PERIOD_S,
      signers: new SignerFactory({ mode: "auto" }),
    });
    await keys.load(projectId);
    await store.close();
    children = Array.from({ length: PROCESSES }, () => startChild([dir.path, masterKeyText, projectId, String(PERIOD_S)]));
  });
  afterAll(async () => {
    for (const child of children) child.proc.stdin.end();
    await Promise.all(children.map((child) => child.proc.exited));
    dir.remove();
  });

  test(`${PROCESSES} processes ticking together rotate exactly once per period, ${ROUNDS} periods in a row`, async () => {
    expect(await tickAll(T0 + 1000)).toEqual([]);
    const currents = [(await keySet()).keys.find((k) => k.state === "current")?.kid];
    for (let round = 1; round <= ROUNDS; round++) {
      const start = T0 + round * PERIOD_S * 1000 + 1000;
      // Half a period in: nothing is due, nobody rotates.
      if (round > 1) expect(await tickAll(start - (PERIOD_S * 1000) / 2)).toEqual([]);
      const rotated = await tickAll(start);
      expect(rotated).toHaveLength(1);
      // A second pass at the same instant finds the rotation done.
      expect(await tickAll(start)).toEqual([]);
      const set = await keySet();
      expect(set.rotatedAt).toBe(start);
      const current = set.keys.find((k) => k.state === "current")?.kid;
      expect(JSON.parse(rotated[0] as string).kid).toBe(current);
      currents.push(current);
    }
    // A new current key each period; the next key of each period became the current of the next.
    expect(new Set(currents).size).toBe(ROUNDS + 1);
  }, 30_000);
});
