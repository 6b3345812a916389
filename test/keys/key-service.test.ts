import { afterEach, describe, expect, test } from "bun:test";
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { loadConfig } from "../../src/config/load.ts";
import { createProject } from "../../src/core/projects.ts";
import { AppError } from "../../src/errors.ts";
import { generateSigningKey } from "../../src/keys/generate.ts";
import { KeyService } from "../../src/keys/key-service.ts";
import { MasterKeyError, decodeMasterKey, generateMasterKeyText } from "../../src/keys/master-key.ts";
import { importMasterKey } from "../../src/keys/sealing.ts";
import { SignerFactory } from "../../src/keys/signers/factory.ts";
import { silentLogger } from "../../src/logging/logger.ts";
import { openContext } from "../../src/startup.ts";
import { join } from "node:path";
import { open, type RootDatabase } from "lmdb";
import { key as lmdbKey } from "../../src/store/lmdb/lmdb-keys.ts";
import { LMDB_FILE, openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import type { KeySetRecord } from "../../src/store/store.ts";
import { FakeClock, T0, buildTestApp, createProviderAndClient, tempDir, type TestApp, type TestAppOptions } from "../helpers/app.ts";
import { expectError } from "../http/support.ts";
import { newProjectId } from "../store/fixtures.ts";

const PERIOD_S = 3600;
const MAX_AGE_S = 300;
const RETAIN_S = 172_800 + 300;
const ISSUER = "https://tokens.example.test";
const AUDIENCE = "https://api.example.test";

const opened: TestApp[] = [];
const dirs: { path: string; remove: () => void }[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.close();
  for (const d of dirs.splice(0)) d.remove();
});

/** A test app with a 3600 s rotation period; closed after the test. */
async function app(options: TestAppOptions = {}): Promise<TestApp> {
  const t = await buildTestApp({ rotationPeriod: PERIOD_S, ...options });
  opened.push(t);
  return t;
}

async function closeApp(t: TestApp): Promise<void> {
  opened.splice(opened.indexOf(t), 1);
  await t.close();
}

function sharedDir(): string {
  const dir = tempDir();
  dirs.push(dir);
  return dir.path;
}

/** Two services on one data directory and clock; `b` has followed it once, and its log lines are collected. */
async function followingPair(): Promise<{ a: TestApp; b: TestApp; clock: FakeClock; logLines: string[] }> {
  const dataDir = sharedDir();
  const clock = new FakeClock();
  const a = await app({ dataDir, clock });
  const logLines: string[] = [];
  const b = await app({ dataDir, masterKey: a.masterKey, clock, logLines });
  await b.ctx.keys.follow();
  return { a, b, clock, logLines };
}

/** Two services on one data directory as followingPair, with `count` more projects (with keys) that both have loaded. */
async function pairWithProjects(count: number): Promise<{ a: TestApp; b: TestApp; clock: FakeClock }> {
  const dataDir = sharedDir();
  const clock = new FakeClock();
  const env = { TOKENMINT_BASE_DOMAIN: "tm.example.test" };
  const a = await app({ dataDir, clock, env });
  for (let i = 0; i < count; i++) {
    await createProject(a.ctx.store, { slug: `p${i}`, name: `P${i}` }, a.ctx.instance, clock.now(), (id, policy) => a.ctx.keys.newKeySet(id, policy));
  }
  await a.ctx.projects.refresh();
  await a.ctx.keys.loadAll(a.ctx.projects.ids);
  const b = await app({ dataDir, masterKey: a.masterKey, clock, env });
  await b.ctx.keys.follow();
  await b.ctx.keys.tick();
  expect(b.ctx.projects.ids.filter((id) => b.ctx.keys.has(id))).toHaveLength(count + 1);
  return { a, b, clock };
}

/** The projects of `t` other than the default one, in creation order. */
const extraProjects = (t: TestApp) => t.ctx.projects.ids.filter((id) => id !== t.ctx.projectId).sort();

const ring = (t: TestApp) => t.ctx.keys.ring(t.ctx.projectId);
const jwks = (t: TestApp) => JSON.parse(ring(t).jwksBody) as JSONWebKeySet;
const jwksKids = (t: TestApp) => jwks(t).keys.map((k) => k.kid as string);
const storedSet = async (t: TestApp) => (await t.ctx.store.getKeySet(t.ctx.projectId))!;

async function signToken(t: TestApp, lifetimeS: number): Promise<string> {
  const iat = Math.floor(t.clock.now() / 1000);
  return ring(t).sign("at+jwt", { iss: ISSUER, sub: "client", client_id: "client", aud: AUDIENCE, iat, exp: iat + lifetimeS, jti: crypto.randomUUID() });
}

/** Verifies `token` against the ring's current JWKS at the fake clock's time; returns the signing kid. */
async function verify(t: TestApp, token: string): Promise<string | undefined> {
  const { protectedHeader } = await jwtVerify(token, createLocalJWKSet(jwks(t)), {
    issuer: ISSUER,
    audience: AUDIENCE,
    typ: "at+jwt",
    currentDate: new Date(t.clock.now()),
  });
  return protectedHeader.kid;
}

/** Records, in order, each call of the named methods of the app's store (which still run). */
function recordCalls(t: TestApp, names: readonly string[]): string[] {
  const calls: string[] = [];
  const store = t.ctx.store as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of names) {
    const original = (store[name] as (...args: unknown[]) => unknown).bind(store);
    store[name] = (...args: unknown[]) => {
      calls.push(name);
      return original(...args);
    };
  }
  return calls;
}

/** Runs `op`, which must reject with an AppError; returns its code. */
async function appErrorCode(op: Promise<unknown>): Promise<string> {
  try {
    await op;
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return (error as AppError).code;
  }
  throw new Error("expected an AppError");
}

describe("KeyService rotation", () => {
  test("tokens stay verifiable across 5 rotations until their exp; each new key was published first", async () => {
    const t = await app();
    const firstSeen = new Map<string, number>();
    const observe = () => jwksKids(t).forEach((kid) => firstSeen.has(kid) || firstSeen.set(kid, t.clock.now()));
    observe();
    const tokens: { token: string; kid: string }[] = [];
    for (let i = 0; i < 5; i++) {
      const token = await signToken(t, 172_800);
      tokens.push({ token, kid: decodeProtectedHeader(token).kid as string });
      expect(tokens.at(-1)?.kid).toBe(ring(t).kid);
      const before = { kids: jwksKids(t), kid: ring(t).kid, version: ring(t).version };
      t.clock.advance(PERIOD_S);
      await t.ctx.keys.tick();
      expect(ring(t).version).toBe(before.version + 1);
      expect(ring(t).kid).not.toBe(before.kid);
      expect(before.kids).toContain(ring(t).kid);
      expect(t.clock.now() - firstSeen.get(ring(t).kid)!).toBeGreaterThanOrEqual(MAX_AGE_S * 1000);
      observe();
      for (const { token, kid } of tokens) expect(await verify(t, token)).toBe(kid);
    }
    expect(new Set(tokens.map((x) => x.kid)).size).toBe(5);
    expect(jwksKids(t)).toHaveLength(7); // current, next and 5 retired keys
    // One second before the first token expires, every token still verifies.
    t.clock.ms = ((decodeJwt(tokens[0]!.token).exp as number) - 1) * 1000;
    await t.ctx.keys.tick();
    for (const { token, kid } of tokens) expect(await verify(t, token)).toBe(kid);
  });

  test("a retired key leaves the JWKS and the store exactly at retirement + 48 h + 300 s", async () => {
    const t = await app();
    const first = ring(t).kid;
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
    const retiredAt = t.clock.now();
    const removeAt = retiredAt + RETAIN_S * 1000;
    expect((await t.ctx.keys.list(t.ctx.projectId)).find((k) => k.kid === first)).toMatchObject({ state: "retired", retiredAt, removedFromJwksAt: removeAt });
    t.clock.ms = removeAt - 1;
    await t.ctx.keys.tick();
    expect(jwksKids(t)).toContain(first);
    const etag = ring(t).jwksEtag;
    t.clock.ms = removeAt;
    await t.ctx.keys.tick();
    expect(jwksKids(t)).not.toContain(first);
    expect((await storedSet(t)).keys.map((k) => k.kid)).not.toContain(first);
    expect(ring(t).jwksEtag).not.toBe(etag);
  });

  test("a retired key keeps only its public half; a set that kept a retired key's private half loses it at the next pass", async () => {
    const t = await app();
    const before = (await storedSet(t)).keys.find((k) => k.state === "current")!;
    expect(before.sealedPrivateJwk).toBeString();
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
    const rotated = await storedSet(t);
    const retired = rotated.keys.find((k) => k.kid === before.kid)!;
    expect(retired).toEqual({ ...retired, state: "retired", publicJwk: before.publicJwk });
    expect(retired).not.toHaveProperty("sealedPrivateJwk");
    expect(rotated.keys.filter((k) => k.sealedPrivateJwk !== undefined).map((k) => k.state).sort()).toEqual(["current", "next"]);
    // A set as an earlier build wrote it, the retired key's private half still sealed in it.
    const older = { ...rotated, version: rotated.version + 1, keys: rotated.keys.map((k) => (k.kid === before.kid ? { ...k, sealedPrivateJwk: before.sealedPrivateJwk } : k)) };
    expect(await t.ctx.store.swapKeySet(older, rotated.version)).toBe(true);
    const etag = ring(t).jwksEtag;
    await t.ctx.keys.tick();
    const stripped = await storedSet(t);
    expect(stripped.version).toBe(older.version + 1);
    expect(stripped.keys).toEqual(rotated.keys);
    expect(stripped.keys.find((k) => k.kid === before.kid)).not.toHaveProperty("sealedPrivateJwk");
    expect(ring(t).jwksEtag).toBe(etag);
  });

  /**
   * Data as an earlier version left it: a key retired with its private half still sealed in the
   * set. The service that made it is closed; `down` seconds pass before the caller opens another.
   */
  async function dataWithRetiredPrivateHalf(down: number) {
    const dataDir = sharedDir();
    const clock = new FakeClock();
    const a = await app({ dataDir, clock });
    const before = (await storedSet(a)).keys.find((k) => k.state === "current")!;
    clock.advance(PERIOD_S);
    await a.ctx.keys.tick();
    const rotated = await storedSet(a);
    const older = { ...rotated, version: rotated.version + 1, keys: rotated.keys.map((k) => (k.kid === before.kid ? { ...k, sealedPrivateJwk: before.sealedPrivateJwk } : k)) };
    expect(await a.ctx.store.swapKeySet(older, rotated.version)).toBe(true);
    await closeApp(a);
    clock.advance(down);
    return { dataDir, clock, masterKey: a.masterKey, before, rotated, older };
  }

  test("a first pass that rotates says so, and that it dropped the private halves an earlier version kept", async () => {
    // Down for longer than a period: the first pass of the next service rotates.
    const { dataDir, clock, masterKey, before } = await dataWithRetiredPrivateHalf(PERIOD_S + 60);
    const logLines: string[] = [];
    const b = await app({ dataDir, clock, masterKey, logLines });
    await b.ctx.keys.tick();
    await b.ctx.keys.tick();
    expect(logLines.filter((line) => line.includes("signing key rotated"))).toHaveLength(1);
    expect(logLines.filter((line) => line.includes("private halves of retired signing keys dropped"))).toEqual([expect.stringContaining('"count":1')]);
    const after = await storedSet(b);
    expect(after.keys.filter((k) => k.sealedPrivateJwk !== undefined).map((k) => k.state).sort()).toEqual(["current", "next"]);
    expect(after.keys.find((k) => k.kid === before.kid)).not.toHaveProperty("sealedPrivateJwk");
  });

  test("a retired key's private half kept in the data is dropped by the first pass of a service opened on it", async () => {
    const { dataDir, clock, masterKey, before, rotated, older } = await dataWithRetiredPrivateHalf(60);
    const logLines: string[] = [];
    const b = await app({ dataDir, clock, masterKey, logLines });
    await b.ctx.keys.tick();
    await b.ctx.keys.tick();
    // Said once, with how many: the operator sees when it happened.
    expect(logLines.filter((line) => line.includes("private halves of retired signing keys dropped"))).toEqual([expect.stringContaining('"count":1')]);
    const stripped = await storedSet(b);
    expect(stripped.version).toBe(older.version + 1);
    expect(stripped.keys.find((k) => k.kid === before.kid)).toEqual({ ...before, ...rotated.keys.find((k) => k.kid === before.kid)!, sealedPrivateJwk: undefined });
    expect(stripped.keys.find((k) => k.kid === before.kid)).not.toHaveProperty("sealedPrivateJwk");
  });

  test("rotate() right after a rotation is a conflict until the next key is max-age old", async () => {
    const t = await app();
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
    const { version, kid } = ring(t);
    expect(await appErrorCode(t.ctx.keys.rotate(t.ctx.projectId))).toBe("conflict");
    t.clock.advance(MAX_AGE_S - 1);
    expect(await appErrorCode(t.ctx.keys.rotate(t.ctx.projectId))).toBe("conflict");
    expect(ring(t).version).toBe(version);
    expect((await storedSet(t)).version).toBe(version);
    const nextKid = (await storedSet(t)).keys.find((k) => k.state === "next")!.kid;
    t.clock.advance(1);
    const views = await t.ctx.keys.rotate(t.ctx.projectId);
    expect(ring(t).kid).toBe(nextKid);
    expect(ring(t).version).toBe(version + 1);
    expect(views.slice(0, 1)).toEqual([{ kid: nextKid, alg: "ES256", state: "current", createdAt: expect.any(Number), activatesAt: t.clock.now(), retiredAt: undefined, removedFromJwksAt: undefined }]);
    expect(views.find((v) => v.kid === kid)).toMatchObject({ state: "retired", retiredAt: t.clock.now() });
  });
});

describe("KeyService: a key that takes long to make", () => {
  test("a new key set, a scheduled rotation, a manual one and a revocation are dated when their new key is made", async () => {
    const MAKE_MS = 7000;
    let now = T0;
    const store = openLmdbStore(sharedDir());
    const keys = new KeyService({
      store,
      masterKey: await importMasterKey(decodeMasterKey(generateMasterKeyText(), "test")),
      now: () => now,
      logger: silentLogger,
      signingAlg: "ES256",
      rotationPeriod: PERIOD_S,
      signers: new SignerFactory({ mode: "auto" }),
      // Each key takes 7 s to make, as an RSA key can on a busy machine.
      generateKey: async (...args) => {
        const key = await generateSigningKey(...args);
        now += MAKE_MS;
        return key;
      },
    });
    try {
      const projectId = newProjectId(T0);
      await keys.load(projectId);
      const read = async () => (await store.getKeySet(projectId)) as KeySetRecord;
      const byState = (set: KeySetRecord, state: string) => set.keys.filter((k) => k.state === state);
      // Both first keys were made at once, in 14 s: the next key is published from then on.
      const created = T0 + 2 * MAKE_MS;
      let set = await read();
      expect(set.rotatedAt).toBe(created);
      expect(set.keys.map((k) => k.createdAt)).toEqual([created, created]);
      expect(byState(set, "current")[0]?.activatesAt).toBe(created);

      // The scheduled rotation: the old key signs until the new one is made, so it retires then.
      now = created + PERIOD_S * 1000;
      const [old] = byState(set, "current");
      await keys.tick();
      const rotated = now;
      expect(rotated).toBe(created + PERIOD_S * 1000 + MAKE_MS);
      set = await read();
      expect(set.rotatedAt).toBe(rotated);
      expect(set.keys.find((k) => k.kid === old?.kid)).toMatchObject({ state: "retired", retiredAt: rotated, removedFromJwksAt: rotated + RETAIN_S * 1000 });
      expect(byState(set, "current")[0]?.activatesAt).toBe(rotated);
      expect(byState(set, "next")[0]?.createdAt).toBe(rotated);

      // A manual rotation once the next key is max-age old: the same.
      now = rotated + MAX_AGE_S * 1000;
      await keys.rotate(projectId);
      const manual = now;
      expect(manual).toBe(rotated + MAX_AGE_S * 1000 + MAKE_MS);
      set = await read();
      expect(set.rotatedAt).toBe(manual);
      expect(byState(set, "current")[0]?.activatesAt).toBe(manual);
      expect(byState(set, "next")[0]?.createdAt).toBe(manual);
      expect(byState(set, "retired").map((k) => k.retiredAt)).toEqual([rotated, manual]);

      // Revoking the next key: its replacement is published from when it was made.
      await keys.revoke(projectId, byState(set, "next")[0]?.kid as string);
      expect(byState(await read(), "next")[0]?.createdAt).toBe(manual + MAKE_MS);
    } finally {
      await store.close();
    }
  });
});

describe("KeyService: a clock that goes back", () => {
  const YEAR_S = 365 * 86_400;

  test("keys made while the clock was a year ahead: a new next key is published at once, tokens keep verifying, and rotations go on from now", async () => {
    const logLines: string[] = [];
    const t = await app({ logLines });
    // The clock a year ahead (a machine that started with a wrong clock): the missed rotation is made.
    t.clock.advance(YEAR_S);
    await t.ctx.keys.tick();
    const future = await storedSet(t);
    const signing = ring(t).kid;
    const early = await signToken(t, 3600);
    // The clock corrected.
    t.clock.advance(-YEAR_S);
    const corrected = t.clock.now();
    await t.ctx.keys.tick();
    const set = await storedSet(t);
    expect(set.rotatedAt).toBe(corrected);
    const next = set.keys.find((k) => k.state === "next")!;
    expect(next.createdAt).toBe(corrected);
    expect(next.kid).not.toBe(future.keys.find((k) => k.state === "next")!.kid);
    // Nothing that signed left: the current key signs on, and every key it or its predecessors signed with is published.
    expect(ring(t).kid).toBe(signing);
    for (const key of future.keys.filter((k) => k.state !== "next")) expect(jwksKids(t)).toContain(key.kid);
    expect(await verify(t, early)).toBe(signing);
    expect(logLines.filter((line) => line.includes("the clock is behind the signing keys") && line.includes(`"aheadSeconds":${YEAR_S}`))).toHaveLength(1);

    // From now on the schedule is the usual one: the new next key signs one period later.
    t.clock.advance(PERIOD_S - 1);
    await t.ctx.keys.tick();
    expect(ring(t).kid).toBe(signing);
    t.clock.advance(1);
    await t.ctx.keys.tick();
    expect(ring(t).kid).toBe(next.kid);
    expect(await verify(t, early)).toBe(signing);
    expect(logLines.filter((line) => line.includes("the clock is behind"))).toHaveLength(1);
  });

  test("a step back within the clock-skew margin changes nothing", async () => {
    const t = await app();
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
    const before = await storedSet(t);
    t.clock.advance(-290);
    await t.ctx.keys.tick();
    expect(await storedSet(t)).toEqual(before);
  });
});

describe("KeyService: a clock that jumps forward", () => {
  const DAY_S = 86_400;

  test("a next key waits its max-age in time that passed, not in what the clock jumped: timer and manual rotation", async () => {
    const logLines: string[] = [];
    const t = await app({ logLines });
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
    const next = (await storedSet(t)).keys.find((k) => k.state === "next")!;
    const signing = ring(t).kid;
    // One second later the clock is stepped a period and a max-age ahead: by its time the next
    // key was published long ago, but a JWKS fetched just before it came may be held 300 s more.
    t.clock.advance(1);
    t.clock.jump(PERIOD_S + MAX_AGE_S);
    await expectError(await t.api("POST", "/v1/keys/rotate"), 409, "conflict");
    await t.ctx.keys.tick();
    expect(ring(t).kid).toBe(signing);
    expect(logLines.filter((line) => line.includes("the clock jumped forward") && line.includes(`"seconds":${PERIOD_S + MAX_AGE_S}`))).toHaveLength(1);
    // Once the max-age has passed since its publication, it may sign; the period counts from the last rotation as the clock had it.
    t.clock.advance(MAX_AGE_S - 2);
    await expectError(await t.api("POST", "/v1/keys/rotate"), 409, "conflict");
    t.clock.advance(1);
    expect((await t.api("POST", "/v1/keys/rotate")).status).toBe(200);
    expect(ring(t).kid).toBe(next.kid);
  });

  test("a retired key stays published for its whole retention in time that passed, the clock set back after the jump or not", async () => {
    const t = await app();
    const early = await signToken(t, 48 * 3600);
    const first = ring(t).kid;
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
    expect(jwksKids(t)).toContain(first);
    // An hour on, the clock runs three days ahead for a while: nothing the retired key signed may stop verifying.
    t.clock.advance(3600);
    await t.ctx.keys.tick();
    t.clock.jump(3 * DAY_S);
    await t.ctx.keys.tick();
    expect(jwksKids(t)).toContain(first);
    t.clock.ms -= 3 * DAY_S * 1000;
    await t.ctx.keys.tick();
    expect(jwksKids(t)).toContain(first);
    expect(await verify(t, early)).toBe(first);
  });

  test("a manual rotation during the move the pass began waits for it, however many sets there are", async () => {
    const t = await app({ env: { TOKENMINT_BASE_DOMAIN: "tm.example.test" } });
    for (let i = 0; i < 5; i++) {
      await createProject(t.ctx.store, { slug: `p${i}`, name: `P${i}` }, t.ctx.instance, t.clock.now(), (id, policy) => t.ctx.keys.newKeySet(id, policy));
    }
    await t.ctx.projects.refresh();
    await t.ctx.keys.loadAll(t.ctx.projects.ids);
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
    t.clock.advance(1);
    t.clock.jump(PERIOD_S + MAX_AGE_S);
    const pass = t.ctx.keys.tick();
    // The last sets first: the pass has not reached them yet.
    for (const id of t.ctx.projects.ids.reverse()) await expect(t.ctx.keys.rotate(id)).rejects.toMatchObject({ code: "conflict" });
    await pass;
  });

  test("a move that failed is made at the next look; one stamped ahead of a clock set back does not hide a later jump", async () => {
    const t = await app();
    t.clock.advance(PERIOD_S);
    await t.ctx.keys.tick();
    const next = (await storedSet(t)).keys.find((k) => k.state === "next")!;
    t.clock.advance(1);
    t.clock.jump(PERIOD_S + MAX_AGE_S);
    // The first pass after the jump cannot read the set: nothing is moved, and the jump is not forgotten.
    const store = t.ctx.store as { getKeySet: (id: string) => Promise<KeySetRecord | undefined> };
    const read = store.getKeySet.bind(store);
    let failures = 1;
    store.getKeySet = async (id) => {
      if (failures-- > 0) throw new Error("the disk is gone for a moment");
      return read(id);
    };
    await t.ctx.keys.tick();
    await t.ctx.keys.tick();
    expect((await storedSet(t)).clockStepAt).toBe(t.clock.now());
    expect(ring(t).kid).not.toBe(next.kid);

    // The clock set back after a mistaken jump leaves the stamp ahead of it; a real jump later is still followed.
    t.clock.jump(3 * DAY_S);
    await t.ctx.keys.tick();
    t.clock.ms -= 3 * DAY_S * 1000;
    await t.ctx.keys.tick();
    t.clock.advance(2 * PERIOD_S);
    await t.ctx.keys.tick();
    const later = (await storedSet(t)).keys.find((k) => k.state === "next")!;
    t.clock.advance(1);
    t.clock.jump(PERIOD_S + MAX_AGE_S);
    await expectError(await t.api("POST", "/v1/keys/rotate"), 409, "conflict");
    expect(ring(t).kid).not.toBe(later.kid);
  });

  test("two processes that see the same jump move the sets once; a jump within the tolerance moves nothing", async () => {
    const { a, b, clock } = await followingPair();
    await a.ctx.keys.tick();
    await b.ctx.keys.tick();
    clock.jump(1);
    await a.ctx.keys.tick();
    const unmoved = await storedSet(a);
    expect(unmoved.clockStepAt).toBeUndefined();
    clock.advance(1);
    clock.jump(600);
    await a.ctx.keys.tick();
    const moved = await storedSet(a);
    expect(moved.clockStepAt).toBe(clock.now());
    expect(moved.rotatedAt).toBe(unmoved.rotatedAt + 600_000);
    await b.ctx.keys.tick();
    expect(await storedSet(b)).toEqual(moved);
  });
});

describe("KeyService timer", () => {
  test("list() shows public metadata; the next key activates at the scheduled rotation", async () => {
    const t = await app();
    const set = await storedSet(t);
    const [current, next] = [set.keys.find((k) => k.state === "current")!, set.keys.find((k) => k.state === "next")!];
    expect(await t.ctx.keys.list(t.ctx.projectId)).toEqual([
      { kid: current.kid, alg: "ES256", state: "current", createdAt: t.clock.now(), activatesAt: t.clock.now(), retiredAt: undefined, removedFromJwksAt: undefined },
      { kid: next.kid, alg: "ES256", state: "next", createdAt: t.clock.now(), activatesAt: t.clock.now() + PERIOD_S * 1000, retiredAt: undefined, removedFromJwksAt: undefined },
    ]);
    expect(t.ctx.keys.jwksMaxAge(t.ctx.projectId)).toBe(MAX_AGE_S);
  });

  test("with rotation off, tick never rotates but rotate() still works", async () => {
    const t = await app({ rotationPeriod: 0 });
    const { kid, version } = ring(t);
    t.clock.advance(30 * 86_400);
    await t.ctx.keys.tick();
    expect([ring(t).kid, ring(t).version]).toEqual([kid, version]);
    expect((await t.ctx.keys.list(t.ctx.projectId))[1]?.activatesAt).toBeUndefined();
    await t.ctx.keys.rotate(t.ctx.projectId);
    expect(ring(t).kid).not.toBe(kid);
  });
});

describe("KeyService stop", () => {
  test("waits for the pass running: its rotation is stored before the store may close", async () => {
    const logLines: string[] = [];
    const t = await app({ alg: "RS256", logLines });
    const before = ring(t).kid;
    t.clock.advance(PERIOD_S * 1000);
    // Stopped once the pass has read the set it rotates: RS256 makes the new next key then, which
    // takes longer than a turn of the event loop.
    let stopping: Promise<void> | undefined;
    const store = t.ctx.store as unknown as { getKeySet: (id: string) => Promise<unknown> };
    const read = store.getKeySet.bind(store);
    store.getKeySet = (id) => {
      stopping ??= t.ctx.keys.stop();
      return read(id);
    };
    const ticking = t.ctx.keys.tick();
    while (stopping === undefined) await new Promise<void>((resolve) => setTimeout(resolve, 1));
    await stopping;
    const stored = await storedSet(t);
    expect(stored.keys.find((k) => k.state === "current")?.kid).not.toBe(before);
    expect(ring(t).kid).toBe(stored.keys.find((k) => k.state === "current")!.kid);
    await closeApp(t);
    await ticking;
    expect(logLines.filter((line) => line.includes('"level":"error"'))).toEqual([]);
  });

  test("ends the pass running after the set it is at, rather than making every rotation due; the next pass makes the rest", async () => {
    const { a, clock } = await pairWithProjects(9);
    const ids = a.ctx.projects.ids;
    const versions = new Map(ids.map((id) => [id, a.ctx.keys.ring(id).version]));
    let stopping: Promise<void> | undefined;
    const store = a.ctx.store as unknown as { swapKeySet: (...args: unknown[]) => Promise<boolean> };
    const swap = store.swapKeySet.bind(store);
    store.swapKeySet = async (...args) => {
      const stored = await swap(...args);
      stopping ??= a.ctx.keys.stop();
      return stored;
    };
    clock.advance(PERIOD_S);
    await a.ctx.keys.tick();
    await stopping;
    const rotated = () => ids.filter((id) => a.ctx.keys.ring(id).version > (versions.get(id) as number));
    expect(rotated()).toHaveLength(1);
    await a.ctx.keys.tick();
    expect(rotated()).toEqual(ids);
  });

  test("waits for the catch-up of follow running: it reads nothing from a closed store", async () => {
    const { a, b, logLines } = await followingPair();
    const revoked = ring(a).kid;
    await a.ctx.keys.revoke(a.ctx.projectId, revoked);
    const caughtUp = b.ctx.keys.follow();
    expect(caughtUp).toBeInstanceOf(Promise);
    await b.ctx.keys.stop();
    expect(jwksKids(b)).not.toContain(revoked);
    await closeApp(b);
    await caughtUp;
    expect(logLines.filter((line) => line.includes('"level":"error"'))).toEqual([]);
  });

  test("a tick asked for while a pass runs is one more pass after it, shared by every such call", async () => {
    const t = await app();
    await t.ctx.keys.tick();
    const reads = recordCalls(t, ["keysChangeSeq"]);
    const first = t.ctx.keys.tick();
    const second = t.ctx.keys.tick();
    expect(t.ctx.keys.tick()).toBe(second);
    expect(second).not.toBe(first);
    await second;
    expect(reads).toEqual(["keysChangeSeq", "keysChangeSeq"]);
    expect(t.ctx.keys.tick()).not.toBe(second);
    await t.ctx.keys.stop();
  });

});

describe("KeyService.loadAll", () => {
  /** `t`'s key service with `load` replaced by one that takes `ms` and fails for `failing`; what it saw. */
  function instrumented(t: TestApp, failing?: string) {
    const seen = { started: [] as string[], running: 0, most: 0 };
    const keys = t.ctx.keys as unknown as { load: (id: string) => Promise<unknown> };
    keys.load = async (id) => {
      seen.started.push(id);
      seen.most = Math.max(seen.most, ++seen.running);
      try {
        await Bun.sleep(id === failing ? 1 : 5);
        if (id === failing) throw new Error(`cannot load ${id}`);
      } finally {
        seen.running--;
      }
    };
    return seen;
  }
  const ids = Array.from({ length: 30 }, (_, i) => `project-${i}`);

  test("loads every project once, several at a time but never more than eight", async () => {
    const t = await app();
    const seen = instrumented(t);
    await t.ctx.keys.loadAll(ids);
    expect([...seen.started].sort()).toEqual([...ids].sort());
    expect(seen.most).toBe(8);
  });

  test("after a failure starts no further load, lets the running ones finish and throws that failure", async () => {
    const t = await app();
    const seen = instrumented(t, "project-3");
    const failure = await t.ctx.keys.loadAll(ids).then(() => undefined, (error: unknown) => error);
    expect((failure as Error).message).toBe("cannot load project-3");
    expect(seen.running).toBe(0);
    // The eight first loads were under way; project-3 failed first, so none after them began.
    expect(seen.started).toEqual(ids.slice(0, 8));
  });
});

describe("KeyService: a failed maintenance pass", () => {
  /** An app whose store's change counter can be made to fail (`failWith`) and work again (`heal`); and its log. */
  async function failingApp() {
    const logLines: string[] = [];
    const t = await app({ logLines });
    const store = t.ctx.store as unknown as Record<string, unknown>;
    const original = store.keysChangeSeq;
    const failWith = (message: string) => void (store.keysChangeSeq = () => Promise.reject(new Error(message)));
    const heal = () => void (store.keysChangeSeq = original);
    const lines = (...parts: string[]) => logLines.filter((line) => parts.every((part) => line.includes(part))).length;
    return { t, failWith, heal, lines };
  }

  test("a pass whose first read fails is logged and resolves; the next pass tries again", async () => {
    const { t, failWith, heal, lines } = await failingApp();
    failWith("disk gone");
    await t.ctx.keys.tick();
    expect(lines("key maintenance failed", "disk gone")).toBe(1);
    heal();
    const kid = ring(t).kid;
    t.clock.advance(PERIOD_S * 1000);
    await t.ctx.keys.tick();
    expect(ring(t).kid).not.toBe(kid);
  });

  test("a failure that recurs at every pass is logged once a minute, and its end once", async () => {
    const { t, failWith, heal, lines } = await failingApp();
    failWith("store unreadable");
    // Two passes a second for 59 s: one line.
    for (let i = 0; i < 118; i++) {
      await t.ctx.keys.tick();
      t.clock.advance(0.5);
    }
    expect(lines("key maintenance failed", "store unreadable")).toBe(1);
    t.clock.advance(1);
    await t.ctx.keys.tick();
    expect(lines("key maintenance failed", "store unreadable")).toBe(2);
    // Another failure is told at once.
    failWith("another fault");
    await t.ctx.keys.tick();
    expect(lines("key maintenance failed", "another fault")).toBe(1);
    heal();
    await t.ctx.keys.tick();
    await t.ctx.keys.tick();
    expect(lines("key maintenance works again")).toBe(1);
    // A failure after the recovery is news again.
    failWith("store unreadable");
    await t.ctx.keys.tick();
    expect(lines("key maintenance failed", "store unreadable")).toBe(3);
    heal();
  });
});

describe("KeyService revocation", () => {
  test("revoking the current key removes it from the JWKS at once; the ring signs with the next key", async () => {
    const t = await app();
    const old = ring(t).kid;
    const oldToken = await signToken(t, 600);
    const nextKid = (await storedSet(t)).keys.find((k) => k.state === "next")!.kid;
    const views = await t.ctx.keys.revoke(t.ctx.projectId, old);
    expect(jwksKids(t)).not.toContain(old);
    expect(ring(t).kid).toBe(nextKid);
    expect(views.map((v) => v.kid)).not.toContain(old);
    expect(views.map((v) => v.state)).toEqual(["current", "next"]);
    expect(jwksKids(t)).toEqual(views.map((v) => v.kid));
    const fresh = await signToken(t, 600);
    expect(decodeProtectedHeader(fresh).kid).toBe(nextKid);
    expect(await verify(t, fresh)).toBe(nextKid);
    await expect(verify(t, oldToken)).rejects.toThrow();
  });

  test("revoking an unknown kid is not_found and changes nothing", async () => {
    const t = await app();
    const before = await storedSet(t);
    expect(await appErrorCode(t.ctx.keys.revoke(t.ctx.projectId, "no-such-kid"))).toBe("not_found");
    expect(await storedSet(t)).toEqual(before);
  });
});

describe("KeyService across restarts and processes", () => {
  test("a missed rotation is made once, by the pass start() runs at once; until then the stored keys serve", async () => {
    const dataDir = sharedDir();
    const clock = new FakeClock();
    const first = await app({ dataDir, clock });
    const before = await storedSet(first);
    await closeApp(first);
    clock.advance(3 * PERIOD_S);
    const second = await app({ dataDir, masterKey: first.masterKey, clock });
    // Opening made no key: a server answers before the rotations it missed are made.
    expect(await storedSet(second)).toEqual(before);
    expect(ring(second).kid).toBe(before.keys.find((k) => k.state === "current")!.kid);
    // The timer would first fire in a minute: the pass that rotates is the one start() began.
    second.ctx.keys.start(60_000);
    for (let i = 0; i < 200 && (await storedSet(second)).version === before.version; i++) await Bun.sleep(5);
    await second.ctx.keys.stop();
    const after = await storedSet(second);
    expect(after.version).toBe(before.version + 1);
    expect(after.rotatedAt).toBe(clock.now());
    const retired = after.keys.filter((k) => k.state === "retired");
    expect(retired.map((k) => [k.kid, k.retiredAt])).toEqual([[before.keys.find((k) => k.state === "current")!.kid, clock.now()]]);
    expect(ring(second).kid).toBe(before.keys.find((k) => k.state === "next")!.kid);
    await second.ctx.keys.tick();
    expect((await storedSet(second)).version).toBe(after.version);
  });

  test("restarted with a new algorithm after a missed rotation: the rotation is made at once with the published next key, and the new algorithm's key is the next", async () => {
    const dataDir = sharedDir();
    const clock = new FakeClock();
    const first = await app({ dataDir, clock, alg: "ES256" });
    const before = await storedSet(first);
    await closeApp(first);
    clock.advance(3 * PERIOD_S);
    const second = await app({ dataDir, masterKey: first.masterKey, clock, alg: "EdDSA" });
    try {
      await second.ctx.keys.tick();
      const after = await storedSet(second);
      const byState = (state: string) => after.keys.filter((k) => k.state === state);
      expect(after.rotatedAt).toBe(clock.now());
      expect(byState("current").map((k) => [k.kid, k.alg])).toEqual([[before.keys.find((k) => k.state === "next")!.kid, "ES256"]]);
      expect(byState("retired").map((k) => k.kid)).toEqual([before.keys.find((k) => k.state === "current")!.kid]);
      expect(byState("next").map((k) => [k.alg, k.createdAt])).toEqual([["EdDSA", clock.now()]]);
      expect(ring(second).kid).toBe(byState("current")[0]!.kid);
    } finally {
      await closeApp(second);
    }
  });

  test("restarted with a shorter rotation period, the next key waits as long as a JWKS served before may be cached", async () => {
    const dataDir = sharedDir();
    const clock = new FakeClock();
    const first = await app({ dataDir, clock });
    clock.advance(PERIOD_S);
    await first.ctx.keys.tick();
    const rotatedAt = clock.now();
    const fresh = (await storedSet(first)).keys.find((k) => k.state === "next")!;
    expect(fresh.createdAt).toBe(rotatedAt);
    await closeApp(first);
    clock.advance(10);
    const second = await app({ dataDir, masterKey: first.masterKey, clock, rotationPeriod: 60 });
    expect(second.ctx.keys.jwksMaxAge(second.ctx.projectId)).toBe(30);
    await second.ctx.keys.tick();
    expect(await storedSet(second)).toMatchObject({ servedMaxAge: 30, cachedUntil: rotatedAt + 310_000 });
    // Due by the new period (60 s), and its next key published for its max-age (30 s), but a JWKS
    // served before the restart, without that key, may be held 300 s after its publication.
    clock.ms = rotatedAt + 299_000;
    await second.ctx.keys.tick();
    expect(ring(second).kid).not.toBe(fresh.kid);
    expect(await appErrorCode(second.ctx.keys.rotate(second.ctx.projectId))).toBe("conflict");
    clock.advance(1);
    await second.ctx.keys.tick();
    expect(ring(second).kid).toBe(fresh.kid);
  });

  test("two services on one data dir both ticking when due rotate exactly once", async () => {
    const dataDir = sharedDir();
    const clock = new FakeClock();
    const logLines: string[] = [];
    const a = await app({ dataDir, clock, logLines });
    const b = await app({ dataDir, masterKey: a.masterKey, clock, logLines });
    const version = ring(a).version;
    expect(ring(b).version).toBe(version);
    clock.advance(PERIOD_S);
    await Promise.all([a.ctx.keys.tick(), b.ctx.keys.tick()]);
    const set = await storedSet(a);
    expect(set.version).toBe(version + 1);
    expect(set.keys.filter((k) => k.state === "retired")).toHaveLength(1);
    expect([ring(a).version, ring(b).version]).toEqual([version + 1, version + 1]);
    expect(ring(b).kid).toBe(ring(a).kid);
    expect(ring(b).jwksBody).toBe(ring(a).jwksBody);
    expect(jwksKids(a)).toEqual([set.keys.find((k) => k.state === "current")!.kid, set.keys.find((k) => k.state === "next")!.kid, set.keys.find((k) => k.state === "retired")!.kid]);
    expect(logLines.filter((l) => l.includes('"signing key rotated"'))).toHaveLength(1);
  });

  test("each pass looks at the sets in an order of its own, so processes that find the same rotations due mostly make different ones", async () => {
    const { a, clock } = await pairWithProjects(19);
    const ids = a.ctx.projects.ids;
    // Every pass looks at every set: the store cannot tell what was written.
    Reflect.set(a.ctx.store, "keysChangedSince", async () => undefined);
    // The order in which a's passes read the sets. In one fixed order, the workers of a server
    // started after a long stop would each make the key of every missed rotation (an RS256 key
    // is some 70 ms of a core), and only one of each pair can be stored.
    const orders: string[][] = [];
    const store = a.ctx.store as unknown as { getKeySet: (id: string) => Promise<unknown> };
    const read = store.getKeySet.bind(store);
    store.getKeySet = (id) => {
      const order = orders[orders.length - 1] as string[];
      if (!order.includes(id)) order.push(id);
      return read(id);
    };
    for (let pass = 1; pass <= 2; pass++) {
      const versions = ids.map((id) => a.ctx.keys.ring(id).version);
      clock.advance(PERIOD_S);
      orders.push([]);
      await a.ctx.keys.tick();
      expect(ids.map((id) => a.ctx.keys.ring(id).version)).toEqual(versions.map((v) => v + 1));
      expect([...(orders[pass - 1] as string[])].sort()).toEqual([...ids].sort());
    }
    expect(orders[0]).not.toEqual(orders[1]);
  });

  test("a manual rotation by one service is picked up by the other on its next tick", async () => {
    const dataDir = sharedDir();
    const clock = new FakeClock();
    const a = await app({ dataDir, clock });
    const b = await app({ dataDir, masterKey: a.masterKey, clock });
    const old = ring(b).kid;
    clock.advance(MAX_AGE_S);
    await a.ctx.keys.rotate(a.ctx.projectId);
    expect(ring(a).kid).not.toBe(old);
    expect(ring(b).kid).toBe(old);
    // The timer's next tick runs in a later event-loop turn, where lmdb-js reads a fresh snapshot.
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    await b.ctx.keys.tick();
    expect(ring(b).kid).toBe(ring(a).kid);
    expect(ring(b).jwksBody).toBe(ring(a).jwksBody);
  });

  test("an idle tick reads only the change counter; a write anywhere or a due rotation makes it look again", async () => {
    const dataDir = sharedDir();
    const clock = new FakeClock();
    const a = await app({ dataDir, clock });
    const b = await app({ dataDir, masterKey: a.masterKey, clock });
    await b.ctx.keys.tick();
    // Every read of b's key service beyond the change counter goes through these two.
    const reads = recordCalls(b, ["getKeySet", "listProjects"]);
    clock.advance(MAX_AGE_S);
    await b.ctx.keys.tick();
    expect(reads).toEqual([]);

    await a.ctx.keys.rotate(a.ctx.projectId);
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    await b.ctx.keys.tick();
    expect(reads).toContain("getKeySet");
    expect(ring(b).kid).toBe(ring(a).kid);

    reads.length = 0;
    await b.ctx.keys.tick();
    expect(reads).toEqual([]);
    const due = (await a.ctx.keys.list(a.ctx.projectId)).find((k) => k.state === "next")!.activatesAt!;
    const { version } = ring(b);
    clock.ms = due - 1;
    await b.ctx.keys.tick();
    expect(reads).toEqual([]);
    clock.ms = due;
    await b.ctx.keys.tick();
    expect(ring(b).version).toBe(version + 1);
    expect(ring(a).version).toBe(version);
  });

  test("after a pass that went well, a pass reads only the key sets written since and those due", async () => {
    const { a, b, clock } = await pairWithProjects(2);
    const [first, second] = extraProjects(a);
    const reads = recordCalls(b, ["getKeySet", "listProjects"]);
    clock.advance(MAX_AGE_S);
    await a.ctx.keys.rotate(second);
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    await b.ctx.keys.tick();
    expect(reads).toEqual(["getKeySet"]);
    expect(b.ctx.keys.ring(second).kid).toBe(a.ctx.keys.ring(second).kid);

    // The default project and the first one are due at the same time; the second, rotated since, later.
    const due = (await b.ctx.keys.list(first)).find((k) => k.state === "next")!.activatesAt!;
    reads.length = 0;
    const versions = [b.ctx.projectId, first, second].map((id) => b.ctx.keys.ring(id).version);
    clock.ms = due;
    await b.ctx.keys.tick();
    expect(reads).toEqual(["getKeySet", "getKeySet"]);
    expect([b.ctx.projectId, first, second].map((id) => b.ctx.keys.ring(id).version)).toEqual([versions[0]! + 1, versions[1]! + 1, versions[2]]);
  });

  test("a project's new algorithm, written by another process, gets its next key at the next pass", async () => {
    const { a, b } = await pairWithProjects(2);
    const [first] = extraProjects(a);
    const reads = recordCalls(b, ["getKeySet", "listProjects", "getProject"]);
    await a.ctx.store.updateProject(first!, (cur) => ({ ...cur, signingAlg: "EdDSA" }));
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    await b.ctx.keys.tick();
    expect(reads).toEqual(["getProject", "getKeySet"]);
    expect((await b.ctx.keys.list(first!)).find((k) => k.state === "next")?.alg).toBe("EdDSA");
    expect(JSON.parse(b.ctx.keys.ring(first!).jwksBody).keys.map((k: { alg: string }) => k.alg)).toContain("EdDSA");
  });

  test("with rotation off, an idle tick still removes a retired key exactly when it leaves the JWKS", async () => {
    const t = await app({ rotationPeriod: 0 });
    t.clock.advance(t.ctx.keys.jwksMaxAge(t.ctx.projectId));
    const first = ring(t).kid;
    await t.ctx.keys.rotate(t.ctx.projectId);
    const removeAt = (await t.ctx.keys.list(t.ctx.projectId)).find((k) => k.kid === first)!.removedFromJwksAt!;
    await t.ctx.keys.tick();
    await t.ctx.keys.tick();
    const { version } = ring(t);
    t.clock.ms = removeAt - 1;
    await t.ctx.keys.tick();
    expect(jwksKids(t)).toContain(first);
    expect(ring(t).version).toBe(version);
    t.clock.ms = removeAt;
    await t.ctx.keys.tick();
    expect(jwksKids(t)).not.toContain(first);
    expect(ring(t).version).toBe(version + 1);
  });

  test("a wrong or missing master key for existing data throws MasterKeyError and changes nothing", async () => {
    const dataDir = sharedDir();
    const clock = new FakeClock();
    const first = await app({ dataDir, clock });
    const projectId = first.ctx.projectId;
    const before = JSON.stringify(await first.ctx.store.getKeySet(projectId));
    const check = await first.ctx.store.getMeta<string>("masterKeyCheck");
    await closeApp(first);
    clock.advance(3 * PERIOD_S); // a rotation is due: it must not happen
    const env = { TOKENMINT_DATA_DIR: dataDir, TOKENMINT_SIGNING_ALG: "ES256", TOKENMINT_KEY_ROTATION_PERIOD: String(PERIOD_S) };
    for (const masterKey of [generateMasterKeyText(), undefined]) {
      const config = loadConfig({ ...env, TOKENMINT_MASTER_KEY: masterKey });
      await expect(openContext(config, silentLogger, clock)).rejects.toBeInstanceOf(MasterKeyError);
    }
    const store = openLmdbStore(dataDir);
    try {
      expect(JSON.stringify(await store.getKeySet(projectId))).toBe(before);
      expect(await store.getMeta<string>("masterKeyCheck")).toBe(check);
    } finally {
      await store.close();
    }
    expect(await Bun.file(`${dataDir}/master.key`).exists()).toBe(false);
  });
});

describe("KeyService follow", () => {
  test("just opened: the first catch-up and the first pass read no project and no key set when none was written or is due", async () => {
    const { b } = await pairWithProjects(3);
    const dataDir = b.dataDir;
    await closeApp(b);
    const t = await app({ dataDir, masterKey: b.masterKey, clock: b.clock, env: { TOKENMINT_BASE_DOMAIN: "tm.example.test" } });
    const reads = recordCalls(t, ["getKeySet", "listProjects"]);
    // The test app wrote its API key since it opened: a catch-up, which finds no project or key set written.
    await t.ctx.keys.follow();
    await t.ctx.keys.tick();
    expect(reads).toEqual([]);
    expect(t.ctx.projects.ids.filter((id) => t.ctx.keys.has(id))).toHaveLength(4);
  });

  test("nothing written since the last time: no promise, no read but the counter", async () => {
    const t = await app();
    await t.ctx.keys.follow();
    const reads = recordCalls(t, ["getKeySet", "listProjects", "changeSeqNow"]);
    for (let i = 0; i < 5; i++) expect(t.ctx.keys.follow()).toBeUndefined();
    expect(reads).toEqual(Array(5).fill("changeSeqNow"));
  });

  test("a rotation and a revocation made by another service are served from the next follow on, in the same turn", async () => {
    const { a, b, clock } = await followingPair();
    clock.advance(MAX_AGE_S);
    await a.ctx.keys.rotate(a.ctx.projectId);
    expect(ring(b).kid).not.toBe(ring(a).kid);
    await b.ctx.keys.follow();
    expect(ring(b).kid).toBe(ring(a).kid);
    expect(ring(b).jwksBody).toBe(ring(a).jwksBody);
    const revoked = ring(a).kid;
    await a.ctx.keys.revoke(a.ctx.projectId, revoked);
    const caughtUp = b.ctx.keys.follow();
    expect(caughtUp).toBeInstanceOf(Promise);
    await caughtUp;
    expect(jwksKids(b)).not.toContain(revoked);
    expect(ring(b).kid).toBe(ring(a).kid);
    expect(ring(b).kid).not.toBe(revoked);
  });

  test("a ring caught up from another service's rotation makes its signer at its first signature; the tokens carry the new kid and verify against the JWKS served", async () => {
    const { a, b, clock } = await followingPair();
    clock.advance(MAX_AGE_S);
    await a.ctx.keys.rotate(a.ctx.projectId);
    await b.ctx.keys.follow();
    const caughtUp = ring(b);
    expect(caughtUp.kid).toBe(ring(a).kid);
    expect(caughtUp.signerKind).toBeUndefined();
    const tokens = await Promise.all([caughtUp.sign("at+jwt", { sub: "one" }), caughtUp.sign("at+jwt", { sub: "two" })]);
    expect(caughtUp.signerKind).toBe("node-sync");
    for (const [i, token] of tokens.entries()) {
      const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(jwks(b)));
      expect(protectedHeader).toEqual({ alg: "ES256", kid: ring(a).kid, typ: "at+jwt" });
      expect(payload.sub).toBe(i === 0 ? "one" : "two");
    }
  });

  test("a catch-up reads only what was written: no project and no key set after other data, one key set after a rotation, one project after its change", async () => {
    const { a, b } = await pairWithProjects(2);
    const [first, second] = extraProjects(a);
    const reads = recordCalls(b, ["getKeySet", "listProjects", "getProject"]);
    await a.ctx.store.createProvider({ id: crypto.randomUUID(), projectId: a.ctx.projectId, name: "p", description: "", createdAt: a.clock.now(), updatedAt: a.clock.now() });
    const caughtUp = b.ctx.keys.follow();
    expect(caughtUp).toBeInstanceOf(Promise);
    await caughtUp;
    expect(reads).toEqual([]);

    await a.ctx.keys.revoke(second, a.ctx.keys.ring(second).kid);
    await b.ctx.keys.follow();
    expect(reads).toEqual(["getKeySet"]);
    expect(b.ctx.keys.ring(second).kid).toBe(a.ctx.keys.ring(second).kid);

    reads.length = 0;
    await a.ctx.store.updateProject(first, (cur) => ({ ...cur, name: "Renamed", customDomain: "auth.first.test" }));
    await b.ctx.keys.follow();
    expect(reads).toEqual(["getProject"]);
    expect(b.ctx.projects.get(first).name).toBe("Renamed");
    expect(b.ctx.projects.resolveHost("auth.first.test").project.id).toBe(first);
    expect(b.ctx.projects.ids.sort()).toEqual(a.ctx.projects.ids.sort());
  });

  test("a key revoked by a process of an earlier build, which counts no key writes, is out of the JWKS from the next follow on", async () => {
    const { a, b } = await followingPair();
    const revoked = ring(a).kid;
    const before = await a.ctx.store.keysChangeSeq();
    await a.ctx.keys.revoke(a.ctx.projectId, revoked);
    // Made as an earlier build makes it: the change counter moved, and nothing tells of keys.
    const db = open({ path: join(a.dataDir, LMDB_FILE), encoding: "json", compression: false }) as RootDatabase<unknown, string>;
    try {
      await db.transaction(() => {
        db.removeSync(lmdbKey.keysLog(before + 1));
        db.putSync(lmdbKey.keysChangeSeq, before);
        db.putSync(lmdbKey.keysLogged, (db.get(lmdbKey.changeSeq) as number) - 1);
      });
    } finally {
      await db.close();
    }
    expect(jwksKids(b)).toContain(revoked);
    await b.ctx.keys.follow();
    expect(jwksKids(b)).not.toContain(revoked);
    expect(ring(b).kid).toBe(ring(a).kid);
  });

  test("where the store cannot tell what was written, a catch-up reads every project and key set", async () => {
    const { a, b } = await pairWithProjects(2);
    const [, second] = extraProjects(a);
    Reflect.set(b.ctx.store, "keysChangedSince", async () => undefined);
    const reads = recordCalls(b, ["getKeySet", "listProjects"]);
    await a.ctx.keys.revoke(second, a.ctx.keys.ring(second).kid);
    await b.ctx.keys.follow();
    expect(reads.sort()).toEqual(["getKeySet", "getKeySet", "getKeySet", "listProjects"]);
    expect(b.ctx.keys.ring(second).kid).toBe(a.ctx.keys.ring(second).kid);
  });

  test("calls while a catch-up runs share it; a write seen meanwhile gets a catch-up of its own after it", async () => {
    const { a, b } = await followingPair();
    await a.ctx.keys.revoke(a.ctx.projectId, ring(a).kid);
    const first = b.ctx.keys.follow();
    expect(b.ctx.keys.follow()).toBe(first as Promise<void>);
    // Another write before the first catch-up has finished: the next call must not settle for it.
    const second = ring(a).kid;
    await a.ctx.keys.revoke(a.ctx.projectId, second);
    const later = b.ctx.keys.follow();
    expect(later).toBeInstanceOf(Promise);
    expect(later).not.toBe(first as Promise<void>);
    await later;
    expect(jwksKids(b)).not.toContain(second);
    expect(ring(b).kid).toBe(ring(a).kid);
    expect(b.ctx.keys.follow()).toBeUndefined();
  });

  test("a failed catch-up is logged once, never rejects, and the next call tries again", async () => {
    const { a, b, logLines } = await followingPair();
    await a.ctx.keys.revoke(a.ctx.projectId, ring(a).kid);
    const store = b.ctx.store as unknown as Record<string, unknown>;
    const original = store.getKeySet;
    store.getKeySet = () => Promise.reject(new Error("disk gone"));
    await b.ctx.keys.follow();
    await b.ctx.keys.follow();
    // Logged once, not once per request.
    expect(logLines.filter((line) => line.includes("reading a project's signing keys failed") && line.includes("disk gone"))).toHaveLength(1);
    expect(ring(b).kid).not.toBe(ring(a).kid);
    store.getKeySet = original;
    const retry = b.ctx.keys.follow();
    expect(retry).toBeInstanceOf(Promise);
    await retry;
    expect(ring(b).kid).toBe(ring(a).kid);
  });

  test("a catch-up failing for a second: the stale keys neither sign nor are published (503) until one succeeds", async () => {
    const { a, b, clock, logLines } = await followingPair();
    const { providerId, clientId } = await createProviderAndClient(b);
    const revoked = ring(a).kid;
    await a.ctx.keys.revoke(a.ctx.projectId, revoked);
    const store = b.ctx.store as unknown as Record<string, unknown>;
    const original = store.getKeySet;
    store.getKeySet = () => Promise.reject(new Error("disk gone"));
    const tokens = () => b.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, {});
    // Within the second, the memory at hand serves.
    expect((await tokens()).status).toBe(201);
    clock.advance(1);
    for (const res of [await tokens(), await b.request("GET", "/.well-known/jwks"), await b.request("GET", "/readyz")]) {
      await expectError(res, 503, "unavailable");
    }
    expect(() => ring(b)).toThrow("cannot be brought up to date");
    store.getKeySet = original;
    const res = await tokens();
    expect(res.status).toBe(201);
    expect(decodeProtectedHeader(((await res.json()) as { accessToken: string }).accessToken).kid).toBe(ring(a).kid);
    expect(jwksKids(b)).not.toContain(revoked);
    expect(logLines.filter((line) => line.includes("up to date with the data again"))).toHaveLength(1);
  });

  test("reading the change counter failing for a second: 503 until it reads again", async () => {
    const { b, clock, logLines } = await followingPair();
    const store = b.ctx.store as unknown as { changeSeqNow: () => number };
    const original = store.changeSeqNow;
    store.changeSeqNow = () => {
      throw new Error("counter gone");
    };
    expect(b.ctx.keys.follow()).toBeUndefined();
    expect(ring(b).kid).toBeString();
    clock.advance(1);
    await expectError(await b.request("GET", "/.well-known/jwks"), 503, "unavailable");
    expect(logLines.filter((line) => line.includes("reading the change counter failed"))).toHaveLength(1);
    store.changeSeqNow = original;
    expect((await b.request("GET", "/.well-known/jwks")).status).toBe(200);
  });

  test("a store that cannot tell cheaply (no changeSeqNow) leaves it to the tick", async () => {
    const t = await app();
    Reflect.set(t.ctx.store, "changeSeqNow", undefined);
    expect(t.ctx.keys.follow()).toBeUndefined();
  });
});
