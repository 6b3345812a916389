/**
 * @module keys/key-service
 * Runs the key lifecycle of keys/lifecycle.ts against the store: creates a project's first key
 * set, rotates on the timer (and catches up a rotation missed while stopped), revokes, prunes,
 * and keeps each project's KeyRing in memory. Every change is a compare-and-swap on the key set,
 * so two processes on one data file never both rotate. Keys are generated outside the swap.
 * A change made by another process (another worker, the CLI) is picked up by `follow`, which the
 * server calls at the start of every request: when the store's change counter moved, the request
 * waits until the project directory and the loaded rings are up to the data. Where the store
 * cannot be read that way, `tick`, which runs twice a second, picks it up within a second.
 * A tick that finds the store's change counter where the last pass left it, before any loaded
 * set is due for a rotation or a removal, has nothing to do and reads nothing else. Both read
 * only the projects and key sets the store names as written since (`Store#keysChangedSince`),
 * and a pass looks only at those and at the sets due: with many projects, each rotation no
 * longer makes every process re-read them all.
 */
import type { SigningAlg } from "../config/schema.ts";
import { AppError } from "../errors.ts";
import type { Logger } from "../logging/logger.ts";
import type { KeySetRecord, KeysChanges, KeyState, SigningKeyRecord, Store } from "../store/store.ts";
import { generateSigningKey } from "./generate.ts";
import { KeyRing } from "./key-ring.ts";
import {
  aheadOfClock,
  byLifecycleOrder,
  initialKeySet,
  jwksMaxAge,
  keysByState,
  maxAgeChanged,
  nextKeyReadyAt,
  nextPruneAt,
  pruneKeySet,
  rebaseKeySet,
  replaceNextKey,
  revokeKey,
  servedMaxAgeOf,
  shiftKeySet,
  rotateKeySet,
  scheduledRotationAt,
  withMaxAge,
} from "./lifecycle.ts";
import type { SignerFactory } from "./signers/factory.ts";

/** Public metadata of one key, as `GET /v1/keys` and `keys list` show it. */
export type KeyView = Pick<SigningKeyRecord, "kid" | "alg" | "state" | "createdAt" | "activatesAt" | "retiredAt" | "removedFromJwksAt">;

/** Public metadata of a key set, current first; the next key activates at `nextRotation`. */
export function keyViews(set: KeySetRecord, nextRotation: number | undefined): KeyView[] {
  return [...set.keys].sort(byLifecycleOrder).map((k) => ({
    kid: k.kid,
    alg: k.alg,
    state: k.state,
    createdAt: k.createdAt,
    activatesAt: k.state === "next" ? nextRotation : k.activatesAt,
    retiredAt: k.retiredAt,
    removedFromJwksAt: k.removedFromJwksAt,
  }));
}

export interface KeyServiceOptions {
  store: Store;
  masterKey: CryptoKey;
  now: () => number;
  /**
   * Milliseconds on a clock that only runs forward (performance.now), to notice the wall clock
   * (`now`) jumping forward between passes; without it, no jump is looked for.
   */
  elapsed?: () => number;
  logger: Logger;
  /** Algorithm of new keys of a project without a policy of its own. */
  signingAlg: SigningAlg;
  /** Seconds between automatic rotations; 0 = off. For projects without a policy of their own. */
  rotationPeriod: number;
  /** A project's own algorithm and rotation period (read at every use, so a change applies at the next tick). */
  policy?: (projectId: string) => KeyPolicy;
  /**
   * The projects to keep loaded, asked when projects may have been written: new ones are loaded,
   * vanished ones dropped. `written`, when given, names every project written since the
   * directory last read it: the others need no read.
   */
  projects?: (written?: readonly string[]) => Promise<readonly string[]>;
  /** Makes each ring's signer (`serve` logs its plan once). */
  signers: SignerFactory;
  /**
   * Whether `load` also runs maintenance (a missed rotation, a new algorithm, pruning); default
   * true. A CLI command says false: it must not change keys it was not asked to, whatever its own
   * settings say (a server with other settings would only change them back).
   */
  maintainOnLoad?: boolean;
  /**
   * The JWKS max-age (s) a manual rotation waits for after the next key was published; default
   * the project's own (`jwksMaxAge`). A CLI command on data no server has started on passes its
   * own rule (startup.ts): it does not know the settings of the server that will serve the JWKS.
   */
  rotationWait?: (projectId: string) => number;
  /** Makes a new key; default generateSigningKey. A test stands in to stretch the time a key takes. */
  generateKey?: typeof generateSigningKey;
  /**
   * The data is of format 1 (startup.ts DATA_FORMAT): a key keeps its private half when it
   * retires, as builds of that format expect. Default false: it is dropped.
   */
  keepRetiredPrivateHalves?: boolean;
}

/** How a project's keys are generated and rotated. */
export interface KeyPolicy {
  signingAlg: SigningAlg;
  /** Seconds between automatic rotations; 0 = off. */
  rotationPeriod: number;
}

/** What metrics read of a project's loaded key set, without touching the store. */
export interface KeySetStatus {
  /** Number of keys the served JWKS holds (current, next and retired ones still published). */
  jwksKeys: number;
  /** When the timer rotates next (epoch ms); undefined when automatic rotation is off. */
  nextRotationAt: number | undefined;
}

/** How often the compare-and-swap is retried when another writer changed the set meanwhile. */
const MAX_ATTEMPTS = 5;
/**
 * How far (ms) the wall clock may run ahead of the elapsed time between two passes before it
 * counts as a jump: passes are half a second apart, and NTP slews (never steps) small errors.
 */
export const CLOCK_JUMP_MS = 2000;
/**
 * How long the rings may serve after `follow` failed to bring them up to the data: a key revoked
 * through another process or the CLI must not sign, nor stay in the JWKS, past that (the same
 * second the rest of the data's changes are served within; store/caching-store.ts).
 */
export const FOLLOW_FAILED_LIMIT_MS = 1000;
/** A maintenance failure that keeps recurring (a store that cannot be read) is logged again after this long. */
const REPEAT_LOG_MS = 60_000;
/**
 * Projects `loadAll` loads at once: unsealing a key and making its signer wait on the runtime's
 * crypto threads, so loads that overlap start a server with many projects sooner.
 */
const LOAD_CONCURRENCY = 8;

/** How many retired keys of `before` kept their private half there and have none in `after`. */
function droppedPrivateHalves(before: KeySetRecord, after: KeySetRecord): number {
  const sealed = new Set(before.keys.filter((k) => k.state === "retired" && k.sealedPrivateJwk !== undefined).map((k) => k.kid));
  return after.keys.filter((k) => sealed.has(k.kid) && k.sealedPrivateJwk === undefined).length;
}

/** The items of `items` in a random order (Fisher–Yates, in place). */
function shuffled<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

export class KeyService {
  readonly #o: KeyServiceOptions;
  /** Per loaded project: the ring and the stored set it was built from. */
  readonly #loaded = new Map<string, { ring: KeyRing; set: KeySetRecord }>();
  #timer: ReturnType<typeof setInterval> | undefined;
  /** The maintenance pass running now, if any (`stop` waits for it). */
  #ticking: Promise<void> | undefined;
  /** The pass asked for while one ran: it starts when that one ends. */
  #tickAfter: Promise<void> | undefined;
  /**
   * Set by a pass that went without a failure (or by `loadedAsOf`): the store's counter of
   * project and key-set writes read before it, when it was set, and the time the first loaded set
   * is due for maintenance. Until the counter moves, that time comes or the clock goes back, a
   * tick is skipped; after, the next pass looks only at what was written since and what is due.
   */
  #quiet: { seq: number; at: number; until: number } | undefined;
  /** The change counter the directory and the rings were last brought up to by `follow`. */
  #followed: number | undefined;
  /** The counter of project and key-set writes as of the last complete catch-up: the next one reads only what was written after it. */
  #keysCaughtUp: number | undefined;
  /** The catch-up `follow` runs now, and the counter it brings them up to. */
  #catchingUp: { seq: number; done: Promise<void> } | undefined;
  /** The wall clock and the elapsed clock as read after the last look for a jump (`#followClock`). */
  #lastClocks: { wall: number; elapsed: number } | undefined;
  /** The look for a jump running now, which a pass and a rotation share. */
  #clockFollow: Promise<void> | undefined;
  /** Set by `stop` while it waits: the pass running ends after the set it is at. */
  #stopping = false;
  /**
   * When `follow` first failed, while it keeps failing (undefined once it succeeds): it logs the
   * first failure only, not one per request, and rings refuse to serve once it lasts.
   */
  #followFailedAt: number | undefined;
  /** The maintenance failures logged since the last pass that went without one, and when. */
  readonly #failuresLogged = new Map<string, number>();

  constructor(options: KeyServiceOptions) {
    this.#o = options;
  }

  #policy(projectId: string): KeyPolicy {
    return this.#o.policy?.(projectId) ?? { signingAlg: this.#o.signingAlg, rotationPeriod: this.#o.rotationPeriod };
  }

  /**
   * JWKS `Cache-Control` max-age of a project's key set, in seconds: the project's, or the one its
   * set records if shorter. A longer one is served only once a pass has recorded it, so a set
   * never lacks the record of a max-age it was served with: shortened again before that pass,
   * the longer one would hold no next key back (lifecycle.ts recordMaxAge).
   */
  jwksMaxAge(projectId: string): number {
    const policy = jwksMaxAge(this.#policy(projectId).rotationPeriod);
    const set = this.#loaded.get(projectId)?.set;
    return set === undefined ? policy : Math.min(policy, servedMaxAgeOf(set));
  }

  /** Whether the project's ring is loaded (`ring` answers). */
  has(projectId: string): boolean {
    return this.#loaded.has(projectId);
  }

  /**
   * The loaded ring of a project; throws `unavailable` if `load` never ran for it, or while
   * `follow` has failed for FOLLOW_FAILED_LIMIT_MS (the ring may hold a key revoked since).
   */
  ring(projectId: string): KeyRing {
    const ring = this.#loaded.get(projectId)?.ring;
    if (ring === undefined) throw new AppError("unavailable", "Signing keys are not loaded yet.");
    if (this.#followFailedAt !== undefined && this.#o.now() - this.#followFailedAt >= FOLLOW_FAILED_LIMIT_MS) {
      throw new AppError("unavailable", "The signing keys cannot be brought up to date with the data; retry shortly.");
    }
    return ring;
  }

  /**
   * Creates the project's key set if missing, loads the ring, and with `maintain` (default: the
   * `maintainOnLoad` option) catches up a missed rotation.
   */
  async load(projectId: string, maintain = this.#o.maintainOnLoad !== false): Promise<KeyRing> {
    let set = await this.#o.store.getKeySet(projectId);
    if (set === undefined) set = await this.#createInitial(projectId);
    this.#loaded.set(projectId, { ring: await KeyRing.build(set, this.#o.masterKey, this.#o.signers), set });
    if (maintain) await this.#maintain(projectId);
    return this.ring(projectId);
  }

  /**
   * `load` without maintenance for every project of `projectIds`, LOAD_CONCURRENCY at a time: a
   * server's first maintenance pass, which `start` runs at once, makes the rotations missed while
   * it was stopped, so it answers before they are made (the stored keys serve meanwhile; they
   * stay published, and their tokens verify). With many RS256 projects, making them first held
   * up the start for seconds. On a failure no further load starts; the ones under way finish,
   * then the first failure is thrown.
   */
  async loadAll(projectIds: readonly string[]): Promise<void> {
    let next = 0;
    let failure: { error: unknown } | undefined;
    const loader = async () => {
      while (failure === undefined && next < projectIds.length) {
        const projectId = projectIds[next++] as string;
        try {
          await this.load(projectId, false);
        } catch (error) {
          failure ??= { error };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(LOAD_CONCURRENCY, projectIds.length) }, loader));
    if (failure !== undefined) throw failure.error;
  }

  /**
   * Marks the project directory and every loaded ring as read from data at least as recent as
   * the store's counters `asOf`, read before them (the change counter, where the store can read
   * it cheaply, and the counter of project and key-set writes): the first catch-up of `follow`
   * and the first maintenance pass then read only what was written since, and the sets due. A
   * server that re-read every project and key set there (as it did with no such mark) held up its
   * first requests for a fifth of a second with 2,000 projects.
   */
  loadedAsOf(asOf: { seq: number | undefined; keysSeq: number }): void {
    this.#followed = asOf.seq;
    this.#keysCaughtUp = asOf.keysSeq;
    this.#quiet = { seq: asOf.keysSeq, at: this.#o.now(), until: this.#dueAt() };
  }

  /**
   * Creates the key set of each project of `projectIds` that has none (the default project of a
   * new instance), loading no ring: what a server's primary, which signs nothing, does before its
   * workers load them.
   */
  async createMissing(projectIds: readonly string[]): Promise<void> {
    for (const projectId of projectIds) {
      if ((await this.#o.store.getKeySet(projectId)) === undefined) await this.#createInitial(projectId);
    }
  }

  /**
   * A first key set for a project of `policy` (a current and a next key of its algorithm), not
   * stored. It records the JWKS max-age of the policy's rotation period: nothing was served before.
   */
  async newKeySet(projectId: string, policy: KeyPolicy): Promise<KeySetRecord> {
    const alg = policy.signingAlg;
    const [current, next] = await Promise.all([this.#generate(projectId, "current", alg), this.#generate(projectId, "next", alg)]);
    // Dated once made (see #maintain): the next key is published from then on, not from before.
    const now = this.#o.now();
    return initialKeySet(projectId, { ...current, createdAt: now }, { ...next, createdAt: now }, now, jwksMaxAge(policy.rotationPeriod));
  }

  async #createInitial(projectId: string): Promise<KeySetRecord> {
    const set = await this.newKeySet(projectId, this.#policy(projectId));
    const { current, next } = keysByState(set);
    if (await this.#o.store.swapKeySet(set, 0)) {
      this.#o.logger.info("signing keys created", { kid: current.kid, next: next.kid, alg: current.alg });
      return set;
    }
    const winner = await this.#o.store.getKeySet(projectId);
    if (winner === undefined) throw new Error("key set vanished during creation");
    return winner;
  }

  /** A new key of the project, of its algorithm unless `alg` says otherwise, dated when its making began. */
  #generate(projectId: string, state: KeyState, alg = this.#policy(projectId).signingAlg): Promise<SigningKeyRecord> {
    return (this.#o.generateKey ?? generateSigningKey)(projectId, alg, this.#o.masterKey, this.#o.now(), state);
  }

  async #read(projectId: string): Promise<KeySetRecord> {
    const set = await this.#o.store.getKeySet(projectId);
    if (set === undefined) throw new AppError("not_found", "The project has no signing keys.");
    return set;
  }

  /**
   * Reloads the ring if the stored set changed since it was built. Versions only grow: a ring
   * built meanwhile from a later set (by a concurrent refresh) is kept. The new ring makes its
   * signer at its first signature (`KeyRing.of`): a catch-up after many rotations made by another
   * process, which every request waits for, does not unseal each new key first (1,000 ES256
   * rotations took it 140–230 ms that way, 200 RS256 ones 570–710 ms; now 20–40 and 9–17 ms).
   */
  async #refresh(projectId: string, set?: KeySetRecord): Promise<void> {
    const latest = set ?? (await this.#read(projectId));
    if ((this.#loaded.get(projectId)?.set.version ?? -1) >= latest.version) return;
    this.#loaded.set(projectId, { ring: KeyRing.of(latest, this.#o.masterKey, this.#o.signers), set: latest });
  }

  /**
   * Applies `change` to the stored set by compare-and-swap, retrying on a concurrent change.
   * `change` returns the new set, or undefined for "nothing to do".
   */
  async #swap(projectId: string, change: (set: KeySetRecord) => Promise<KeySetRecord | undefined>): Promise<KeySetRecord | undefined> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const set = await this.#read(projectId);
      const next = await change(set);
      if (next === undefined) {
        await this.#refresh(projectId, set);
        return undefined;
      }
      if (await this.#o.store.swapKeySet(next, set.version)) {
        await this.#refresh(projectId, next);
        return next;
      }
    }
    throw new AppError("conflict", "The key set changed concurrently too often; retry.");
  }

  /**
   * Rotation by the timer, a missed one included, removal of expired retired keys, and a new
   * next key when the project's algorithm changed (the next key has never signed, so replacing it
   * is safe; the new one is published for the JWKS max-age before it may sign).
   */
  async #maintain(projectId: string): Promise<void> {
    let pending: Promise<SigningKeyRecord> | undefined;
    // What the attempt that finally swapped did; logged only after the swap succeeded, so a
    // process that lost the race does not report a rotation it did not make.
    let outcome = { removed: 0, dropped: 0 } as { rotated: true; dropped: number } | { replaced: true } | { removed: number; dropped: number } | { aheadMs: number };
    const written = await this.#swap(projectId, async (stored) => {
      const now = this.#o.now();
      const policy = this.#policy(projectId);
      const maxAge = jwksMaxAge(policy.rotationPeriod);
      // The max-age served now is recorded first: a shortened one holds back the next key while a
      // JWKS fetched under the longer one may still be cached.
      const { set, recorded } = withMaxAge(stored, maxAge, now);
      const aheadMs = aheadOfClock(set, now);
      const newAlg = keysByState(set).next.alg !== policy.signingAlg;
      // The records are dated once the new key is made, not when the pass began: making an RSA key
      // on a busy machine can take seconds, and until the swap the old key still signs and the new
      // one is not yet published.
      const due = aheadMs > 0 ? undefined : scheduledRotationAt(set, policy.rotationPeriod, maxAge);
      if (due !== undefined && now >= due) {
        // A rotation due is made with the next key published, whatever its algorithm (an algorithm
        // changed while the server was down): the new next key is of the new one.
        pending ??= this.#generate(projectId, "next");
        const key = await pending;
        const at = this.#o.now();
        const rotated = rotateKeySet(set, { ...key, createdAt: at }, at, maxAge, this.#o.keepRetiredPrivateHalves);
        if (!("readyAt" in rotated)) {
          const result = pruneKeySet(rotated, at, this.#o.keepRetiredPrivateHalves) ?? rotated;
          outcome = { rotated: true, dropped: droppedPrivateHalves(set, result) };
          return result;
        }
        if (!newAlg) return recorded;
      }
      // A next key of another algorithm, or one the clock has not reached (it went back), is
      // replaced by one made now; the second case also counts rotations from now.
      if (newAlg || aheadMs > 0) {
        pending ??= this.#generate(projectId, "next");
        const key = await pending;
        if (key.alg !== policy.signingAlg) return recorded; // the policy changed meanwhile; the next tick retries
        const at = this.#o.now();
        outcome = aheadMs > 0 ? { aheadMs } : { replaced: true };
        return aheadMs > 0 ? rebaseKeySet(set, key, at) : replaceNextKey(set, { ...key, createdAt: at });
      }
      const pruned = pruneKeySet(set, now, this.#o.keepRetiredPrivateHalves);
      outcome = {
        removed: pruned === undefined ? 0 : set.keys.length - pruned.keys.length,
        dropped: pruned === undefined ? 0 : droppedPrivateHalves(set, pruned),
      };
      return pruned ?? recorded;
    });
    if (written === undefined) return;
    const { current, next } = keysByState(written);
    if ("rotated" in outcome) this.#o.logger.info("signing key rotated", { kid: current.kid, reason: "scheduled" });
    else if ("replaced" in outcome) this.#o.logger.info("next signing key replaced for a new algorithm", { kid: next.kid, alg: next.alg });
    else if ("aheadMs" in outcome) {
      this.#o.logger.warn("the clock is behind the signing keys (it went back); a new next key is published and rotations count from now", {
        aheadSeconds: Math.round(outcome.aheadMs / 1000),
        kid: next.kid,
      });
    } else {
      if (outcome.removed > 0) this.#o.logger.info("retired signing keys removed", { count: outcome.removed });
    }
    // Kept by a version before retirement dropped them (keys/lifecycle.ts pruneKeySet), whether
    // the pass that drops them rotates or not.
    if ("dropped" in outcome && outcome.dropped > 0) {
      this.#o.logger.info("private halves of retired signing keys dropped", { count: outcome.dropped });
    }
  }

  /** Promotes the next key now. Conflict when it has not been published for the JWKS max-age yet. */
  async rotate(projectId: string): Promise<KeyView[]> {
    // A jump of the clock since the last pass counts before the key's age is judged.
    await this.#followClock();
    // Generated only once the rotation is allowed, and reused if the swap has to be retried.
    let pending: Promise<SigningKeyRecord> | undefined;
    await this.#swap(projectId, async (stored) => {
      const maxAge = this.#o.rotationWait?.(projectId) ?? jwksMaxAge(this.#policy(projectId).rotationPeriod);
      // The max-age served now counts as #maintain records it (a tick may not have run since it
      // changed). A command that does not know the server's settings waits the bound instead.
      const set = this.#o.rotationWait === undefined ? withMaxAge(stored, maxAge, this.#o.now()).set : stored;
      const readyAt = nextKeyReadyAt(set, maxAge);
      if (this.#o.now() < readyAt) {
        throw new AppError(
          "conflict",
          `The next key has been published for less than the JWKS max-age (${maxAge} s); rotate again after ${new Date(readyAt).toISOString()}.`,
        );
      }
      pending ??= this.#generate(projectId, "next");
      const key = await pending;
      const now = this.#o.now(); // once made (see #maintain)
      const rotated = rotateKeySet(set, { ...key, createdAt: now }, now, maxAge, this.#o.keepRetiredPrivateHalves);
      if ("readyAt" in rotated) throw new Error("rotation refused after its readiness check");
      return rotated;
    });
    this.#o.logger.info("signing key rotated", { kid: this.ring(projectId).kid, reason: "manual" });
    return this.list(projectId);
  }

  /** Revokes `kid`: it leaves the JWKS at once and never signs again. */
  async revoke(projectId: string, kid: string): Promise<KeyView[]> {
    let pending: Promise<SigningKeyRecord> | undefined;
    await this.#swap(projectId, async (set) => {
      const target = set.keys.find((k) => k.kid === kid);
      // A revoked key leaves the set, and so does one past its time in the JWKS: neither is remembered.
      if (target === undefined) throw new AppError("not_found", `No key with kid '${kid}' is in the key set: it never was, or it was revoked or has left the JWKS already.`);
      // A retired key needs no replacement; current or next ones do.
      const replacement = target.state === "retired" ? undefined : await (pending ??= this.#generate(projectId, "next"));
      const now = this.#o.now();
      return revokeKey(set, kid, replacement === undefined ? undefined : { ...replacement, createdAt: now }, now);
    });
    this.#o.logger.warn("signing key revoked", { kid });
    return this.list(projectId);
  }

  /**
   * JWKS size and next scheduled rotation of a loaded project, from memory (undefined if `load`
   * never ran for it). Cheap enough for every metrics scrape.
   */
  status(projectId: string): KeySetStatus | undefined {
    const set = this.#loaded.get(projectId)?.set;
    if (set === undefined) return undefined;
    return { jwksKeys: set.keys.length, nextRotationAt: this.#nextRotation(projectId, set) };
  }

  /** Public metadata of every key of the project. */
  async list(projectId: string): Promise<KeyView[]> {
    const set = await this.#read(projectId);
    return keyViews(set, this.#nextRotation(projectId, set));
  }

  #nextRotation(projectId: string, set: KeySetRecord): number | undefined {
    const { rotationPeriod } = this.#policy(projectId);
    return scheduledRotationAt(set, rotationPeriod, jwksMaxAge(rotationPeriod));
  }


  /**
   * Brings what requests read from memory (the project directory through the `projects` option,
   * and every loaded ring) up to the data as it is now, when the store can tell that cheaply
   * (`Store#changeSeqNow`): undefined when nothing was written since the last time, which is one
   * synchronous read; else a promise that resolves once they are up to date (a ring is rebuilt
   * only if its stored set changed; projects created meanwhile are loaded). It never rejects: a
   * failure is logged (once, until it succeeds again) and the next call tries again; a failure that
   * lasts FOLLOW_FAILED_LIMIT_MS makes `ring` refuse. Rotation and pruning stay with `tick`.
   */
  follow(): Promise<void> | undefined {
    const read = this.#o.store.changeSeqNow;
    if (read === undefined) return undefined;
    let seq: number;
    try {
      seq = read.call(this.#o.store);
    } catch (error) {
      this.#followFailed("reading the change counter failed", error);
      return undefined;
    }
    if (seq === this.#followed) {
      if (this.#followFailedAt !== undefined) this.#followWorks();
      return undefined;
    }
    const running = this.#catchingUp;
    if (running !== undefined && running.seq >= seq) return running.done;
    // After the one running (if any): what it read may predate the write just seen.
    const done = (running?.done ?? Promise.resolve()).then(async () => {
      if (this.#followed !== undefined && this.#followed >= seq) return;
      if (!(await this.#catchUp())) return;
      this.#followed = seq;
      if (this.#followFailedAt !== undefined) this.#followWorks();
    });
    const current = { seq, done };
    this.#catchingUp = current;
    void done.finally(() => {
      if (this.#catchingUp === current) this.#catchingUp = undefined;
    });
    return done;
  }

  /** Logs a failure of `follow`, unless the one before it failed too. */
  #followFailed(message: string, error: unknown): void {
    if (this.#followFailedAt !== undefined) return;
    this.#o.logger.error(message, { error: (error as Error).message });
    this.#followFailedAt = this.#o.now();
  }

  /** `follow` succeeded after failing: the rings serve again. */
  #followWorks(): void {
    this.#followFailedAt = undefined;
    this.#o.logger.info("the signing keys are up to date with the data again");
  }

  /**
   * The project directory and the loaded rings brought up to the data; false if a part failed
   * (logged). The store tells which projects and key sets were written since the last complete
   * catch-up, and only those are read: after a write of other data (a client, an API key), none;
   * after a rotation, that one key set. With many projects, re-reading them all held up every
   * request after each such write. Where the store cannot tell, everything is read.
   */
  async #catchUp(): Promise<boolean> {
    const since = this.#keysCaughtUp;
    let keysSeq: number;
    let changes: KeysChanges | undefined;
    try {
      changes = since === undefined ? undefined : await this.#o.store.keysChangedSince(since);
      keysSeq = changes?.seq ?? (await this.#o.store.keysChangeSeq());
    } catch (error) {
      this.#followFailed("reading the change counter failed", error);
      return false;
    }
    // Nothing written, as far as the store can tell. When it cannot (a process of an earlier build
    // wrote, which may not count its writes of keys), everything is read.
    if (changes !== undefined && changes.seq === since) return true;
    let caughtUp = true;
    try {
      if (!(await this.#syncWritten(changes))) caughtUp = false;
    } catch (error) {
      caughtUp = false;
      this.#followFailed("reading the projects failed", error);
    }
    // A project loaded just now read its key set then; one not loaded is read when it is.
    for (const projectId of changes?.keySets ?? this.#loaded.keys()) {
      if (!this.#loaded.has(projectId)) continue;
      try {
        await this.#refresh(projectId);
      } catch (error) {
        caughtUp = false;
        this.#followFailed("reading a project's signing keys failed", error);
      }
    }
    if (caughtUp) {
      this.#keysCaughtUp = keysSeq;
      this.#o.logger.debug("caught up with the data written by another process", {
        projects: changes === undefined ? "all" : changes.projects.length,
        keySets: changes === undefined ? "all" : changes.keySets.length,
      });
    }
    return caughtUp;
  }

  /**
   * One maintenance pass: load projects created meanwhile (drop deleted ones), then for every
   * loaded project pick up outside changes, rotate, prune. It starts after this call: while a
   * pass runs, the next one starts when it ends (calls meanwhile share that one). Never rejects:
   * a failure is logged, and the next pass tries again.
   */
  tick(): Promise<void> {
    const running = this.#ticking;
    if (running === undefined) return this.#startPass();
    this.#tickAfter ??= running.then(() => {
      this.#tickAfter = undefined;
      return this.#startPass();
    });
    return this.#tickAfter;
  }

  #startPass(): Promise<void> {
    const pass = this.#pass().finally(() => {
      this.#ticking = undefined;
    });
    this.#ticking = pass;
    return pass;
  }

  /**
   * Looks whether the wall clock jumped forward since the last look, beyond the time that passed
   * (an NTP step, a clock set by hand; a suspended machine too, whose elapsed clock stood still),
   * and if so moves the sets with it (`#followJump`). A pass and a rotation that look at once
   * share one look, so neither goes on before the sets are moved. The clocks are recorded only
   * once the sets are moved: a move that fails is made again at the next look.
   */
  #followClock(): Promise<void> {
    this.#clockFollow ??= this.#followClockOnce().finally(() => {
      this.#clockFollow = undefined;
    });
    return this.#clockFollow;
  }

  async #followClockOnce(): Promise<void> {
    const elapsed = this.#o.elapsed;
    if (elapsed === undefined) return;
    const last = this.#lastClocks;
    if (last !== undefined) {
      const byMs = this.#o.now() - last.wall - (elapsed() - last.elapsed);
      if (byMs > CLOCK_JUMP_MS) await this.#followJump(byMs, last.wall);
    }
    this.#lastClocks = { wall: this.#o.now(), elapsed: elapsed() };
  }

  /**
   * After the clock jumped forward by `byMs` since `before` (by the old clock): moves every loaded
   * set's instants with it (lifecycle.ts shiftKeySet), so no next key signs, and no retired key
   * leaves the JWKS, early by the jump. A set another process moved for this jump (`clockStepAt`
   * after `before` and not after now) is left as it is; one moved before, or stamped ahead of a
   * clock set back since, is moved again.
   */
  async #followJump(byMs: number, before: number): Promise<void> {
    this.#o.logger.warn("the clock jumped forward; the signing keys' publication and retention times move with it", { seconds: Math.round(byMs / 1000) });
    for (const projectId of [...this.#loaded.keys()]) {
      await this.#swap(projectId, async (set) => {
        const now = this.#o.now();
        const moved = set.clockStepAt !== undefined && set.clockStepAt > before && set.clockStepAt <= now;
        return moved ? undefined : shiftKeySet(set, byMs, now);
      });
    }
    this.#quiet = undefined;
  }

  async #pass(): Promise<void> {
    let seq: number;
    let failed = false;
    let targets: string[];
    try {
      await this.#followClock();
      // Read first: a write that lands during the pass moves the counter past it, so the next tick looks again.
      seq = await this.#o.store.keysChangeSeq();
      const now = this.#o.now();
      const quiet = this.#quiet;
      // A clock that went back since (now before `at`) ends the quiet too: the sets may be ahead of it.
      const steady = quiet !== undefined && quiet.at <= now;
      if (steady && quiet.seq === seq && now < quiet.until) return;
      this.#quiet = undefined;
      // After a pass that went well, only what was written since and what is due needs a look.
      const changes = !steady ? undefined : quiet.seq === seq ? { seq, projects: [], keySets: [] } : await this.#o.store.keysChangedSince(quiet.seq);
      if (changes !== undefined) seq = changes.seq;
      failed = !(await this.#syncWritten(changes));
      // In an order of its own: processes that find the same sets due (the workers of a server,
      // after a stop longer than the rotation period) mostly make different ones, not each the
      // key of every rotation, of which only one can be stored.
      targets = shuffled(changes === undefined ? [...this.#loaded.keys()] : [...this.#needingMaintenance(changes, now)]);
    } catch (error) {
      this.#logFailure(error);
      return;
    }
    for (const projectId of targets) {
      // A stopping server does not wait for every rotation due (after a long stop, making
      // hundreds of RS256 keys takes many seconds): the next start makes the rest.
      if (this.#stopping) return;
      if (!this.#loaded.has(projectId)) continue;
      try {
        await this.#maintain(projectId);
      } catch (error) {
        failed = true;
        this.#logFailure(error);
      }
    }
    if (failed) return;
    if (this.#failuresLogged.size > 0) {
      this.#failuresLogged.clear();
      this.#o.logger.info("key maintenance works again");
    }
    this.#quiet = { seq, at: this.#o.now(), until: this.#dueAt() };
  }

  /**
   * The loaded projects a pass looks at when the last one went well: those whose record or key
   * set was written since (`changes`), and those whose set, as loaded, is due at `now`. Every
   * other set was read by a pass or a catch-up after its last write, so its due time is known.
   */
  #needingMaintenance(changes: KeysChanges, now: number): Set<string> {
    const targets = new Set([...changes.projects, ...changes.keySets]);
    for (const [projectId, { set }] of this.#loaded) if (this.#dueOf(projectId, set) <= now) targets.add(projectId);
    return targets;
  }

  /** Logs a failed pass; the same failure again only after REPEAT_LOG_MS (a pass runs twice a second). */
  #logFailure(error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    const now = this.#o.now();
    const logged = this.#failuresLogged.get(message);
    if (logged !== undefined && now - logged < REPEAT_LOG_MS) return;
    this.#failuresLogged.set(message, now);
    this.#o.logger.error("key maintenance failed", { error: message });
  }

  /** The earliest time a loaded set needs maintenance (`#dueOf`), over every loaded set. */
  #dueAt(): number {
    let due = Number.POSITIVE_INFINITY;
    for (const [projectId, { set }] of this.#loaded) due = Math.min(due, this.#dueOf(projectId, set));
    return due;
  }

  /**
   * When a project's set needs maintenance: its scheduled rotation, a retired key leaving the
   * JWKS, or now when its next key is not of the project's algorithm, when it is ahead of the
   * clock, when it records another JWKS max-age than its policy's (or its policy cannot be read);
   * infinity when never.
   */
  #dueOf(projectId: string, set: KeySetRecord): number {
    let policy: KeyPolicy;
    try {
      policy = this.#policy(projectId);
    } catch {
      return this.#o.now();
    }
    if (keysByState(set).next.alg !== policy.signingAlg || aheadOfClock(set, this.#o.now()) > 0 || maxAgeChanged(set, jwksMaxAge(policy.rotationPeriod))) {
      return this.#o.now();
    }
    return Math.min(this.#nextRotation(projectId, set) ?? Number.POSITIVE_INFINITY, nextPruneAt(set, this.#o.keepRetiredPrivateHalves) ?? Number.POSITIVE_INFINITY);
  }

  /**
   * Brings the project directory up to the data and loads or drops projects accordingly: every
   * project when `changes` is undefined, those it names as written otherwise (none: nothing to
   * do). False if a project failed to load; throws when the projects cannot be read.
   */
  async #syncWritten(changes: KeysChanges | undefined): Promise<boolean> {
    if (this.#o.projects === undefined || (changes !== undefined && changes.projects.length === 0)) return true;
    return this.#syncProjects(await this.#o.projects(changes?.projects));
  }

  /** Loads projects created meanwhile and drops deleted ones; false if a project failed to load. */
  async #syncProjects(ids: readonly string[]): Promise<boolean> {
    let loaded = true;
    const current = new Set(ids);
    for (const projectId of this.#loaded.keys()) if (!current.has(projectId)) this.#loaded.delete(projectId);
    for (const projectId of ids) {
      if (this.#loaded.has(projectId)) continue;
      try {
        await this.load(projectId);
      } catch (error) {
        loaded = false;
        this.#o.logger.error("loading a project's signing keys failed", { error: (error as Error).message });
      }
    }
    return loaded;
  }

  /**
   * Runs a maintenance pass now and starts the timer (twice a second: rotations are made on
   * time, and outside changes are picked up within a second where `follow` cannot).
   */
  start(intervalMs = 500): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.tick(), intervalMs);
    void this.tick();
  }

  /**
   * Stops the timer, then waits for the maintenance pass and the catch-up of `follow` running now,
   * if any: the store can be closed once it resolves (a pass cut off by the close would lose its
   * rotation and read from a closed store). The pass ends after the set it is at.
   */
  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#stopping = true;
    try {
      while (this.#ticking !== undefined || this.#tickAfter !== undefined || this.#catchingUp !== undefined) {
        await Promise.all([this.#tickAfter ?? this.#ticking, this.#catchingUp?.done]);
      }
    } finally {
      this.#stopping = false;
    }
  }
}
