import { describe, expect, test } from "bun:test";
import {
  CLOCK_SKEW_S,
  aheadOfClock,
  rebaseKeySet,
  MAX_TOKEN_LIFETIME_S,
  initialKeySet,
  jwksMaxAge,
  keysByState,
  nextKeyReadyAt,
  nextPruneAt,
  pruneKeySet,
  recordMaxAge,
  replaceNextKey,
  retiredUntil,
  revokeKey,
  rotateKeySet,
  scheduledRotationAt,
} from "../../src/keys/lifecycle.ts";
import type { KeySetRecord, SigningKeyRecord } from "../../src/store/store.ts";

const T0 = Date.UTC(2026, 0, 1);
const S = 1000;
const P = "0190f0c0-0000-7000-8000-000000000001";
const RETAIN_MS = (172_800 + 300) * S;

function key(kid: string, state: SigningKeyRecord["state"], createdAt: number): SigningKeyRecord {
  return {
    kid,
    alg: "ES256",
    state,
    createdAt,
    publicJwk: { kty: "EC", crv: "P-256", x: kid, y: kid, kid, alg: "ES256", use: "sig" },
    sealedPrivateJwk: `sealed-${kid}`,
  };
}

/** `k` as retirement leaves it: its private half dropped. */
function withoutPrivate(k: SigningKeyRecord): SigningKeyRecord {
  const { sealedPrivateJwk: _, ...rest } = k;
  return rest;
}

/** current "c" (rotated at T0), next "n" created at T0, one retired key "r". */
function sampleSet(): KeySetRecord {
  return {
    projectId: P,
    version: 4,
    rotatedAt: T0,
    keys: [
      { ...key("c", "current", T0 - 3600 * S), activatesAt: T0 },
      key("n", "next", T0),
      { ...withoutPrivate(key("r", "retired", T0 - 7200 * S)), activatesAt: T0 - 3600 * S, retiredAt: T0, removedFromJwksAt: T0 + RETAIN_MS },
    ],
  };
}

describe("jwksMaxAge", () => {
  test("is 300 s when rotation is off, half a short period, capped at 300 s", () => {
    expect(jwksMaxAge(0)).toBe(300);
    expect(jwksMaxAge(60)).toBe(30);
    expect(jwksMaxAge(61)).toBe(30);
    expect(jwksMaxAge(600)).toBe(300);
    expect(jwksMaxAge(86400)).toBe(300);
  });

  test("the retention margin is the longest token lifetime plus the clock skew", () => {
    expect(MAX_TOKEN_LIFETIME_S + CLOCK_SKEW_S).toBe(172_800 + 300);
    expect(retiredUntil(T0)).toBe(T0 + RETAIN_MS);
  });
});

describe("initialKeySet", () => {
  test("version 1, current active now, next waiting", () => {
    const set = initialKeySet(P, key("a", "next", T0), key("b", "current", T0), T0 + 5);
    expect(set).toEqual({
      projectId: P,
      version: 1,
      rotatedAt: T0 + 5,
      keys: [
        { ...key("a", "current", T0), activatesAt: T0 + 5 },
        key("b", "next", T0),
      ],
    });
    expect(keysByState(set).current.kid).toBe("a");
    expect(keysByState(set).next.kid).toBe("b");
  });
});

describe("recordMaxAge", () => {
  test("a set of an earlier build counts as served with the bound, 300 s: recording that writes nothing", () => {
    expect(recordMaxAge(sampleSet(), 300, T0)).toBeUndefined();
    expect(recordMaxAge({ ...sampleSet(), servedMaxAge: 30 }, 30, T0)).toBeUndefined();
  });

  test("a new set records the max-age it is created for", () => {
    expect(initialKeySet(P, key("a", "current", T0), key("b", "next", T0), T0, 30).servedMaxAge).toBe(30);
  });

  test("a shortened max-age holds back the next key while a JWKS fetched under the longer one may lack it", () => {
    const changed = T0 + 10 * S;
    const set = recordMaxAge(sampleSet(), 30, changed) as KeySetRecord;
    expect(set).toEqual({ ...sampleSet(), version: 5, servedMaxAge: 30, cachedUntil: changed + 300 * S });
    // "n", published at T0, before the change: 300 s after its publication, not 30.
    expect(nextKeyReadyAt(set, 30)).toBe(T0 + 300 * S);
    // A next key published after the change: until a JWKS fetched just before it has expired.
    expect(nextKeyReadyAt(replaceNextKey(set, key("m", "next", changed + 5 * S)), 30)).toBe(changed + 300 * S);
    // One published long after: its own max-age.
    expect(nextKeyReadyAt(replaceNextKey(set, key("o", "next", changed + 300 * S)), 30)).toBe(changed + 330 * S);
    // The rotation schedule follows.
    expect(scheduledRotationAt(set, 60, 30)).toBe(T0 + 300 * S);
  });

  test("shortened twice, the later expiry holds; lengthened, nothing is held back beyond the new max-age", () => {
    const once = recordMaxAge(sampleSet(), 60, T0) as KeySetRecord;
    const twice = recordMaxAge(once, 30, T0 + 10 * S) as KeySetRecord;
    expect(twice.cachedUntil).toBe(Math.max(T0 + 300 * S, T0 + 70 * S));
    const longer = recordMaxAge({ ...sampleSet(), servedMaxAge: 30 }, 300, T0) as KeySetRecord;
    expect(longer).toEqual({ ...sampleSet(), version: 5, servedMaxAge: 300 });
    expect(nextKeyReadyAt(longer, 300)).toBe(T0 + 300 * S);
  });

  test("a set rebased after the clock went back holds back no further than the bound from now", () => {
    const set = { ...sampleSet(), servedMaxAge: 30, cachedUntil: T0 + 3600 * S };
    const now = T0 - 7200 * S;
    expect(rebaseKeySet(set, key("n2", "next", now), now).cachedUntil).toBe(now + 300 * S);
  });
});

describe("rotateKeySet", () => {
  test("refuses until the next key has been published for maxAge, returning readyAt", () => {
    const set = sampleSet();
    expect(nextKeyReadyAt(set, 300)).toBe(T0 + 300 * S);
    expect(rotateKeySet(set, key("x", "next", T0), T0, 300)).toEqual({ readyAt: T0 + 300 * S });
    expect(rotateKeySet(set, key("x", "next", T0), T0 + 300 * S - 1, 300)).toEqual({ readyAt: T0 + 300 * S });
    expect(rotateKeySet(set, key("x", "next", T0), T0 + 10 * S, 5)).not.toHaveProperty("readyAt");
  });

  test("at readyAt: next becomes current, current retires with its removal time and without its private half, a new next is published", () => {
    const set = sampleSet();
    const now = T0 + 300 * S;
    const rotated = rotateKeySet(set, key("x", "current", now - 1), now, 300);
    expect(rotated).toEqual({
      projectId: P,
      version: 5,
      rotatedAt: now,
      keys: [
        { ...withoutPrivate(set.keys[0]!), state: "retired", retiredAt: now, removedFromJwksAt: now + RETAIN_MS },
        { ...set.keys[1]!, state: "current", activatesAt: now },
        set.keys[2]!,
        key("x", "next", now - 1),
      ],
    });
    expect(set).toEqual(sampleSet());
    // Data of format 1: the retired key keeps its private half.
    const kept = rotateKeySet(set, key("x", "current", now - 1), now, 300, true) as KeySetRecord;
    expect(kept.keys.find((k) => k.kid === "c")).toEqual({ ...set.keys[0]!, state: "retired", retiredAt: now, removedFromJwksAt: now + RETAIN_MS });
  });
});

describe("scheduledRotationAt", () => {
  test("undefined when rotation is off", () => {
    expect(scheduledRotationAt(sampleSet(), 0, 300)).toBeUndefined();
  });

  test("one period after the last rotation", () => {
    expect(scheduledRotationAt(sampleSet(), 3600, 300)).toBe(T0 + 3600 * S);
  });

  test("never before the next key is ready", () => {
    const set = { ...sampleSet(), rotatedAt: T0 - 3600 * S };
    expect(scheduledRotationAt(set, 60, 300)).toBe(T0 + 300 * S);
    const late = { ...set, keys: set.keys.map((k) => (k.state === "next" ? { ...k, createdAt: T0 + 50 * S } : k)) };
    expect(scheduledRotationAt(late, 3600, 30)).toBe(T0 + 80 * S);
  });
});

describe("revokeKey", () => {
  const now = T0 + 10 * S;
  const replacement = key("z", "current", now);

  test("the current key: next is promoted at once, the replacement becomes next", () => {
    const set = sampleSet();
    expect(revokeKey(set, "c", replacement, now)).toEqual({
      projectId: P,
      version: 5,
      rotatedAt: now,
      keys: [{ ...set.keys[1]!, state: "current", activatesAt: now }, set.keys[2]!, { ...replacement, state: "next" }],
    });
  });

  test("the next key: current keeps signing, the replacement becomes next", () => {
    const set = sampleSet();
    expect(revokeKey(set, "n", replacement, now)).toEqual({
      projectId: P,
      version: 5,
      rotatedAt: T0,
      keys: [set.keys[0]!, set.keys[2]!, { ...replacement, state: "next" }],
    });
  });

  test("a retired key: it is dropped and nothing else changes", () => {
    const set = sampleSet();
    expect(revokeKey(set, "r", replacement, now)).toEqual({ projectId: P, version: 5, rotatedAt: T0, keys: [set.keys[0]!, set.keys[1]!] });
  });

  test("an unknown kid: undefined", () => {
    expect(revokeKey(sampleSet(), "nope", replacement, now)).toBeUndefined();
  });
});

describe("pruneKeySet", () => {
  test("keeps a retired key until removedFromJwksAt, drops it at that instant", () => {
    const set = sampleSet();
    expect(pruneKeySet(set, T0)).toBeUndefined();
    expect(pruneKeySet(set, T0 + RETAIN_MS - 1)).toBeUndefined();
    expect(pruneKeySet(set, T0 + RETAIN_MS)).toEqual({ ...set, version: 5, keys: [set.keys[0]!, set.keys[1]!] });
  });

  test("never drops current or next keys, nor a retired key without a removal time", () => {
    const set = sampleSet();
    const { removedFromJwksAt: _, ...noRemoval } = set.keys[2]!;
    const kept = { ...set, keys: [set.keys[0]!, set.keys[1]!, noRemoval] };
    expect(pruneKeySet(kept, T0 + 100 * RETAIN_MS)).toBeUndefined();
  });

  test("drops the private halves retired keys of a set written before retirement did kept; the current and next keys keep theirs", () => {
    const set = sampleSet();
    const older = { ...set, keys: [set.keys[0]!, set.keys[1]!, { ...set.keys[2]!, sealedPrivateJwk: "sealed-r" }] };
    const pruned = pruneKeySet(older, T0);
    expect(pruned).toEqual({ ...set, version: 5 });
    expect(pruned?.keys.map((k) => k.sealedPrivateJwk)).toEqual(["sealed-c", "sealed-n", undefined]);
    // Data of format 1 keeps them.
    expect(pruneKeySet(older, T0, true)).toBeUndefined();
    // Past the retired key's time, it goes and nothing else changes.
    expect(pruneKeySet(older, T0 + RETAIN_MS)).toEqual({ ...set, version: 5, keys: [set.keys[0]!, set.keys[1]!] });
  });
});

describe("nextPruneAt", () => {
  test("the earliest removal of a retired key; undefined without one; the retirement of a retired key that still has its private half", () => {
    const set = sampleSet();
    expect(nextPruneAt(set)).toBe(T0 + RETAIN_MS);
    expect(nextPruneAt({ ...set, keys: [set.keys[0]!, set.keys[1]!] })).toBeUndefined();
    const later = { ...set.keys[2]!, kid: "r2", retiredAt: T0 + S, removedFromJwksAt: T0 + RETAIN_MS + S };
    expect(nextPruneAt({ ...set, keys: [...set.keys, later] })).toBe(T0 + RETAIN_MS);
    expect(nextPruneAt({ ...set, keys: [...set.keys, { ...later, sealedPrivateJwk: "sealed-r2" }] })).toBe(T0 + S);
    expect(nextPruneAt({ ...set, keys: [...set.keys, { ...later, sealedPrivateJwk: "sealed-r2" }] }, true)).toBe(T0 + RETAIN_MS);
  });
});

describe("a key set ahead of the clock", () => {
  test("is ahead only beyond the clock-skew margin, by its last rotation or its next key's creation", () => {
    const set = sampleSet();
    expect(aheadOfClock(set, T0)).toBe(0);
    expect(aheadOfClock(set, T0 - CLOCK_SKEW_S * S)).toBe(0);
    expect(aheadOfClock(set, T0 - CLOCK_SKEW_S * S - 1)).toBe(CLOCK_SKEW_S * S + 1);
    const laterNext = { ...set, keys: set.keys.map((k) => (k.state === "next" ? { ...k, createdAt: T0 + 3600 * S } : k)) };
    expect(aheadOfClock(laterNext, T0)).toBe(3600 * S);
  });

  test("rebased: a new next key created now, rotations counted from now; every other key kept as it was", () => {
    const set = sampleSet();
    const now = T0 - 86_400 * S;
    const rebased = rebaseKeySet(set, key("n2", "next", T0 + 999 * S), now);
    expect(rebased.version).toBe(set.version + 1);
    expect(rebased.rotatedAt).toBe(now);
    expect(keysByState(rebased).next).toMatchObject({ kid: "n2", createdAt: now, state: "next" });
    expect(rebased.keys.filter((k) => k.state !== "next")).toEqual(set.keys.filter((k) => k.state !== "next"));
    expect(aheadOfClock(rebased, now)).toBe(0);
  });
});
