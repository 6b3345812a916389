/**
 * @module keys/lifecycle
 * The rules of the key lifecycle, as pure functions of a key set and `now` (epoch ms):
 *
 *   next ──rotate──▶ current ──rotate──▶ retired ──(last token expired)──▶ removed
 *
 * - A key set always holds exactly one current key (it signs) and one next key (published in the
 *   JWKS, signs nothing yet).
 * - A rotation promotes next to current only once next has been published for at least the JWKS
 *   max-age, so every verifier that refreshes its cached JWKS knows the key before it sees a token.
 *   When the max-age was shortened (a shorter rotation period), a JWKS fetched under the longer one
 *   may be held longer: until then no next key signs either (`recordMaxAge`).
 * - A retired key stays in the JWKS until every token it may have signed has expired: retirement +
 *   the longest token lifetime + a clock-skew margin. It never signs again: its private half is
 *   dropped when it retires (`retire`), and only the public half stays.
 * - A revoked key leaves the set (and the JWKS) at once and never signs again.
 */
import type { KeySetRecord, SigningKeyRecord } from "../store/store.ts";

/** Longest token lifetime the service issues, in seconds (CONTRACT §2). */
export const MAX_TOKEN_LIFETIME_S = 172_800;
/** Clock skew tolerated between us and verifiers, in seconds. */
export const CLOCK_SKEW_S = 300;
/** Upper bound of the JWKS `Cache-Control: max-age`, in seconds. */
export const MAX_JWKS_MAX_AGE_S = 300;

/**
 * The JWKS max-age for a rotation period: at most 5 minutes and at most half the period, so the
 * next key is always published longer than a verifier may cache the old set.
 */
export function jwksMaxAge(rotationPeriodS: number): number {
  return rotationPeriodS > 0 ? Math.min(MAX_JWKS_MAX_AGE_S, Math.floor(rotationPeriodS / 2)) : MAX_JWKS_MAX_AGE_S;
}

/** Orders keys current, next, retired (newest first within a state): the JWKS and listing order. */
export function byLifecycleOrder(a: SigningKeyRecord, b: SigningKeyRecord): number {
  const rank = { current: 0, next: 1, retired: 2 } as const;
  return rank[a.state] - rank[b.state] || b.createdAt - a.createdAt;
}

/** A key set's keys by state. */
export function keysByState(set: KeySetRecord): { current: SigningKeyRecord; next: SigningKeyRecord; retired: SigningKeyRecord[] } {
  const current = set.keys.find((k) => k.state === "current");
  const next = set.keys.find((k) => k.state === "next");
  if (current === undefined || next === undefined) throw new Error(`key set of project ${set.projectId} lacks a current or next key`);
  return { current, next, retired: set.keys.filter((k) => k.state === "retired") };
}

/** The first key set of a project: `current` signs now, `next` waits. */
export function initialKeySet(projectId: string, current: SigningKeyRecord, next: SigningKeyRecord, now: number, servedMaxAgeS?: number): KeySetRecord {
  return {
    projectId,
    version: 1,
    rotatedAt: now,
    keys: [{ ...current, state: "current", activatesAt: now }, { ...next, state: "next" }],
    ...(servedMaxAgeS === undefined ? {} : { servedMaxAge: servedMaxAgeS }),
  };
}

/**
 * Earliest instant the next key may start signing: once published for the JWKS max-age. After the
 * max-age was shortened (`recordMaxAge`), a JWKS without the key may have been fetched under the
 * longer one until the change, and held until `cachedUntil`: the key waits for that too, or for
 * the bound since it was published, whichever comes first (a key published before the change was
 * in every JWKS fetched after its publication).
 */
export function nextKeyReadyAt(set: KeySetRecord, maxAgeS: number): number {
  const published = keysByState(set).next.createdAt;
  const held = set.cachedUntil === undefined ? Number.NEGATIVE_INFINITY : Math.min(set.cachedUntil, published + MAX_JWKS_MAX_AGE_S * 1000);
  return Math.max(published + maxAgeS * 1000, held);
}

/** The max-age a set was served with, as recorded: sets of earlier builds recorded none and were served with at most the bound. */
export const servedMaxAgeOf = (set: KeySetRecord) => set.servedMaxAge ?? MAX_JWKS_MAX_AGE_S;

/**
 * Records `maxAgeS` as the JWKS max-age the set is served with from `now` on; undefined when it is
 * the one recorded. Where it is shorter (the project's rotation period was shortened, or the
 * instance's across a restart), a verifier may hold a JWKS fetched under the longer one until
 * `now` plus that max-age, and a next key it does not hold must not sign before then: the set
 * keeps that instant as `cachedUntil` (`nextKeyReadyAt`).
 */
export function recordMaxAge(set: KeySetRecord, maxAgeS: number, now: number): KeySetRecord | undefined {
  const served = servedMaxAgeOf(set);
  if (served === maxAgeS) return undefined;
  const cachedUntil = maxAgeS < served ? Math.max(set.cachedUntil ?? 0, now + served * 1000) : set.cachedUntil;
  return { ...set, version: set.version + 1, servedMaxAge: maxAgeS, ...(cachedUntil === undefined ? {} : { cachedUntil }) };
}

/**
 * `stored` with `maxAgeS` recorded as the JWKS max-age it is served with (`recordMaxAge`): `set`,
 * at the stored version, for a swap to build on within its one version step, and `recorded`,
 * that write alone (undefined when there is nothing to record).
 */
export function withMaxAge(stored: KeySetRecord, maxAgeS: number, now: number): { set: KeySetRecord; recorded: KeySetRecord | undefined } {
  const recorded = recordMaxAge(stored, maxAgeS, now);
  return { set: recorded === undefined ? stored : { ...recorded, version: stored.version }, recorded };
}

/** Whether the set records another max-age than `maxAgeS`: `recordMaxAge` has something to write. */
export const maxAgeChanged = (set: KeySetRecord, maxAgeS: number) => servedMaxAgeOf(set) !== maxAgeS;

/** When the timer rotates this set (undefined when automatic rotation is off). */
export function scheduledRotationAt(set: KeySetRecord, periodS: number, maxAgeS: number): number | undefined {
  if (periodS <= 0) return undefined;
  return Math.max(set.rotatedAt + periodS * 1000, nextKeyReadyAt(set, maxAgeS));
}

/**
 * Rotates: next becomes current, current retires (without its private half, unless
 * `keepPrivate`: data of format 1), `newNext` is published. Returns `readyAt` instead when the
 * next key has not been published for the JWKS max-age yet.
 */
export function rotateKeySet(
  set: KeySetRecord,
  newNext: SigningKeyRecord,
  now: number,
  maxAgeS: number,
  keepPrivate = false,
): KeySetRecord | { readyAt: number } {
  const readyAt = nextKeyReadyAt(set, maxAgeS);
  if (now < readyAt) return { readyAt };
  const { current, next } = keysByState(set);
  const keys = set.keys.map((k): SigningKeyRecord => {
    if (k.kid === current.kid) return { ...retire(k, keepPrivate), retiredAt: now, removedFromJwksAt: retiredUntil(now) };
    if (k.kid === next.kid) return { ...k, state: "current", activatesAt: now };
    return k;
  });
  return { ...set, version: set.version + 1, rotatedAt: now, keys: [...keys, { ...newNext, state: "next" }] };
}

/** `key` retired: its private half dropped (kept with `keepPrivate`: data of format 1), its public half kept. */
function retire(key: SigningKeyRecord, keepPrivate = false): SigningKeyRecord {
  if (keepPrivate) return { ...key, state: "retired" };
  const { sealedPrivateJwk: _dropped, ...kept } = key;
  return { ...kept, state: "retired" };
}

/** The instant a key retired at `retiredAt` leaves the JWKS. */
export const retiredUntil = (retiredAt: number) => retiredAt + (MAX_TOKEN_LIFETIME_S + CLOCK_SKEW_S) * 1000;

/**
 * Revokes `kid`: it leaves the set at once. Revoking the current key promotes the next key
 * immediately (an emergency does not wait for caches); revoking current or next publishes
 * `replacement` as the new next key (required for those two states, ignored for a retired key).
 * Returns undefined when `kid` is not in the set.
 */
export function revokeKey(set: KeySetRecord, kid: string, replacement: SigningKeyRecord | undefined, now: number): KeySetRecord | undefined {
  const target = set.keys.find((k) => k.kid === kid);
  if (target === undefined) return undefined;
  const rest = set.keys.filter((k) => k.kid !== kid);
  if (target.state === "retired") return { ...set, version: set.version + 1, keys: rest };
  if (replacement === undefined) throw new Error(`revoking the ${target.state} key needs a replacement next key`);
  const promoted =
    target.state === "current" ? rest.map((k): SigningKeyRecord => (k.state === "next" ? { ...k, state: "current", activatesAt: now } : k)) : rest;
  return {
    ...set,
    version: set.version + 1,
    rotatedAt: target.state === "current" ? now : set.rotatedAt,
    keys: [...promoted, { ...replacement, state: "next" }],
  };
}

/**
 * Publishes `replacement` as the next key instead of the current next key, which has never
 * signed (used when the project's algorithm changes). The replacement waits the JWKS max-age from
 * its `createdAt` before it may sign, like any next key.
 */
export function replaceNextKey(set: KeySetRecord, replacement: SigningKeyRecord): KeySetRecord {
  return { ...set, version: set.version + 1, keys: [...set.keys.filter((k) => k.state !== "next"), { ...replacement, state: "next" }] };
}

/**
 * How far (ms) the key set is ahead of `now`: its last rotation, or its next key's creation, lies
 * in the future by more than the clock-skew margin. Only a clock that went back (a machine that
 * started with its clock ahead, corrected later) does this; 0 otherwise. Until the clock caught
 * up, such a set would not rotate: its next key would not count as published long enough.
 */
export function aheadOfClock(set: KeySetRecord, now: number): number {
  const ahead = Math.max(set.rotatedAt, keysByState(set).next.createdAt) - now;
  return ahead > CLOCK_SKEW_S * 1000 ? ahead : 0;
}

/**
 * A set ahead of the clock brought back to it: `replacement`, created now, is the next key (the
 * one it replaces never signed), and the rotation schedule starts from now. The current key
 * signs on; every published key stays published. A `cachedUntil` is kept no further ahead than
 * the longest max-age from now.
 */
export function rebaseKeySet(set: KeySetRecord, replacement: SigningKeyRecord, now: number): KeySetRecord {
  const rebased = { ...replaceNextKey(set, { ...replacement, createdAt: now }), rotatedAt: now };
  if (rebased.cachedUntil !== undefined) rebased.cachedUntil = Math.min(rebased.cachedUntil, now + MAX_JWKS_MAX_AGE_S * 1000);
  return rebased;
}

/**
 * The set with every instant moved `byMs` later, as seen at `at` just after the clock jumped
 * forward by that much (keys/key-service.ts notices it): the instants a server recorded before
 * the jump lie `byMs` further in the past by the new clock than they are, so a next key would
 * count as published, and a retired key as past its retention, that much early. Instants of the
 * past stay no later than `at`. `clockStepAt` records the move, so a process that noticed the same
 * jump does not move the set again.
 */
export function shiftKeySet(set: KeySetRecord, byMs: number, at: number): KeySetRecord {
  // An instant of the past moved is no later than now: one written since the jump, by its clock, stays now.
  const past = (t: number) => Math.min(t + byMs, at);
  return {
    ...set,
    version: set.version + 1,
    rotatedAt: past(set.rotatedAt),
    ...(set.cachedUntil === undefined ? {} : { cachedUntil: set.cachedUntil + byMs }),
    clockStepAt: at,
    keys: set.keys.map((k) => {
      const moved: SigningKeyRecord = { ...k, createdAt: past(k.createdAt) };
      // A next key's activation is to come; the others' have passed.
      if (k.activatesAt !== undefined) moved.activatesAt = k.state === "next" ? k.activatesAt + byMs : past(k.activatesAt);
      if (k.retiredAt !== undefined) moved.retiredAt = past(k.retiredAt);
      if (k.removedFromJwksAt !== undefined) moved.removedFromJwksAt = k.removedFromJwksAt + byMs;
      return moved;
    }),
  };
}

/**
 * When `pruneKeySet` next changes the set: the earliest time a retired key leaves the JWKS, or its
 * retirement (a time past) when a retired key still has its private half and `keepPrivate` is
 * not set (undefined: never).
 */
export function nextPruneAt(set: KeySetRecord, keepPrivate = false): number | undefined {
  let at: number | undefined;
  for (const k of set.keys) {
    if (k.state !== "retired") continue;
    const when = !keepPrivate && k.sealedPrivateJwk !== undefined ? (k.retiredAt ?? 0) : k.removedFromJwksAt;
    if (when !== undefined && (at === undefined || when < at)) at = when;
  }
  return at;
}

/**
 * Drops retired keys whose last token has expired, and (unless `keepPrivate`: data of format 1)
 * the private halves retired keys kept in sets written before retirement dropped them; undefined
 * when nothing changes.
 */
export function pruneKeySet(set: KeySetRecord, now: number, keepPrivate = false): KeySetRecord | undefined {
  const kept = set.keys.filter((k) => k.state !== "retired" || (k.removedFromJwksAt ?? Infinity) > now);
  const sealed = !keepPrivate && kept.some((k) => k.state === "retired" && k.sealedPrivateJwk !== undefined);
  if (kept.length === set.keys.length && !sealed) return undefined;
  return { ...set, version: set.version + 1, keys: sealed ? kept.map((k) => (k.state === "retired" ? retire(k) : k)) : kept };
}
