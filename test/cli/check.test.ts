/**
 * `inspectData`, what `tokenmint check` and `restore` read of a data directory: the master key
 * must open the private half of every key that signs or will; retired keys keep none.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { inspectData } from "../../src/cli/check.ts";
import { StartupError } from "../../src/startup.ts";
import { buildTestApp, type TestApp } from "../helpers/app.ts";

const PERIOD_S = 3600;
let open: TestApp | undefined;

afterEach(async () => {
  await open?.close();
  open = undefined;
});

/** A test app whose default project has rotated twice: current, next and two retired keys. */
async function rotatedTwice(): Promise<TestApp> {
  const t = (open = await buildTestApp({ rotationPeriod: PERIOD_S }));
  for (let i = 0; i < 2; i++) {
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
  }
  return t;
}

describe("inspectData", () => {
  test("opens the private halves of the current and next keys; the retired keys have none to open", async () => {
    const t = await rotatedTwice();
    const set = (await t.ctx.store.getKeySet(t.ctx.projectId))!;
    expect(set.keys.map((k) => [k.state, k.sealedPrivateJwk === undefined])).toEqual(
      expect.arrayContaining([
        ["current", false],
        ["next", false],
        ["retired", true],
        ["retired", true],
      ]),
    );
    expect(set.keys).toHaveLength(4);
    const report = await inspectData(t.ctx.store, t.ctx.config, t.dataDir);
    expect(report.masterKey).toMatchObject({ opened: 2 });
    expect(report.keySet?.keys).toHaveLength(4);
  });

  test("a key that may sign without its private half fails, naming it", async () => {
    const t = await rotatedTwice();
    const set = (await t.ctx.store.getKeySet(t.ctx.projectId))!;
    const next = set.keys.find((k) => k.state === "next")!;
    const damaged = { ...set, version: set.version + 1, keys: set.keys.map((k) => (k === next ? { ...k, sealedPrivateJwk: undefined } : k)) };
    expect(await t.ctx.store.swapKeySet(damaged, set.version)).toBe(true);
    const failure = await inspectData(t.ctx.store, t.ctx.config, t.dataDir).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(StartupError);
    expect((failure as Error).message).toBe(`the next signing key ${next.kid} in ${t.dataDir} has no private half`);
  });
});
