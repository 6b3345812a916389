/**
 * @module keys/key-service
 * Runs the key lifecycle of keys/lifecycle.ts against the store: creates a project's first key
 * set, rotates on the timer (and catches up a rotation missed while stopped), revokes, prunes,
 * and keeps each project's KeyRing in memory. Every change is a compare-and-swap on the key set,
 * so two processes on one data file never both rotate. Keys are generated outside the swap.
 * A change made by another process (the CLI) is picked up by `tick`, which runs twice a second, so the change is served within a second.
 */
import type { SigningAlg } from "../config/schema.ts";
import { AppError } from "../errors.ts";
import type { Logger } from "../logging/logger.ts";
import type { KeySetRecord, KeyState, SigningKeyRecord, Store } from "../store/store.ts";
import { generateSigningKey } from "./generate.ts";
import { KeyRing } from "./key-ring.ts";
import type { SignerFactory } from "./signers/factory.ts";
import { byLifecycleOrder, initialKeySet, jwksMaxAge, nextKeyReadyAt, pruneKeySet, revokeKey, rotateKeySet, scheduledRotationAt } from "./lifecycle.ts";

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
  logger: Logger;
  signingAlg: SigningAlg;
  /** Seconds between automatic rotations; 0 = off. */
  rotationPeriod: number;
  /** Makes each ring's signer; the fastest available signers when left out. */
  signers?: SignerFactory;
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

export class KeyService {
  readonly #o: KeyServiceOptions;
  /** Per loaded project: the ring and the stored set it was built from. */
  readonly #loaded = new Map<string, { ring: KeyRing; set: KeySetRecord }>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #ticking = false;

  constructor(options: KeyServiceOptions) {
    this.#o = options;
  }

  /** JWKS `Cache-Control` max-age in seconds. */
  get jwksMaxAge(): number {
    return jwksMaxAge(this.#o.rotationPeriod);
  }

  /** The loaded ring of a project; throws `unavailable` if `load` never ran for it. */
  ring(projectId: string): KeyRing {
    const ring = this.#loaded.get(projectId)?.ring;
    if (ring === undefined) throw new AppError("unavailable", "Signing keys are not loaded yet.");
    return ring;
  }

  /** Creates the project's key set if missing, catches up a missed rotation and loads the ring. */
  async load(projectId: string): Promise<KeyRing> {
    let set = await this.#o.store.getKeySet(projectId);
    if (set === undefined) set = await this.#createInitial(projectId);
    this.#loaded.set(projectId, { ring: await KeyRing.build(set, this.#o.masterKey, this.#o.signers), set });
    await this.#maintain(projectId);
    return this.ring(projectId);
  }

  async #createInitial(projectId: string): Promise<KeySetRecord> {
    const now = this.#o.now();
    const [current, next] = await Promise.all([this.#generate(projectId, "current"), this.#generate(projectId, "next")]);
    const set = initialKeySet(projectId, current, next, now);
    if (await this.#o.store.swapKeySet(set, 0)) {
      this.#o.logger.info("signing keys created", { kid: current.kid, next: next.kid, alg: current.alg });
      return set;
    }
    const winner = await this.#o.store.getKeySet(projectId);
    if (winner === undefined) throw new Error("key set vanished during creation");
    return winner;
  }

  #generate(projectId: string, state: KeyState): Promise<SigningKeyRecord> {
    return generateSigningKey(projectId, this.#o.signingAlg, this.#o.masterKey, this.#o.now(), state);
  }

  async #read(projectId: string): Promise<KeySetRecord> {
    const set = await this.#o.store.getKeySet(projectId);
    if (set === undefined) throw new AppError("not_found", "The project has no signing keys.");
    return set;
  }

  /** Reloads the ring if the stored set changed since it was built. */
  async #refresh(projectId: string, set?: KeySetRecord): Promise<void> {
    const latest = set ?? (await this.#read(projectId));
    if (this.#loaded.get(projectId)?.set.version === latest.version) return;
    this.#loaded.set(projectId, { ring: await KeyRing.build(latest, this.#o.masterKey, this.#o.signers), set: latest });
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

  /** Rotation by the timer, a missed one included, and removal of expired retired keys. */
  async #maintain(projectId: string): Promise<void> {
    let pending: Promise<SigningKeyRecord> | undefined;
    // What the attempt that finally swapped did; logged only after the swap succeeded, so a
    // process that lost the race does not report a rotation it did not make.
    let outcome: { rotated: boolean; removed: number } = { rotated: false, removed: 0 };
    const written = await this.#swap(projectId, async (set) => {
      const now = this.#o.now();
      const due = scheduledRotationAt(set, this.#o.rotationPeriod, this.jwksMaxAge);
      if (due !== undefined && now >= due) {
        pending ??= this.#generate(projectId, "next");
        const rotated = rotateKeySet(set, await pending, now, this.jwksMaxAge);
        if ("readyAt" in rotated) return undefined;
        outcome = { rotated: true, removed: 0 };
        return pruneKeySet(rotated, now) ?? rotated;
      }
      const pruned = pruneKeySet(set, now);
      outcome = { rotated: false, removed: pruned === undefined ? 0 : set.keys.length - pruned.keys.length };
      return pruned;
    });
    if (written === undefined) return;
    if (outcome.rotated) this.#o.logger.info("signing key rotated", { kid: written.keys.find((k) => k.state === "current")?.kid, reason: "scheduled" });
    else if (outcome.removed > 0) this.#o.logger.info("retired signing keys removed", { count: outcome.removed });
  }

  /** Promotes the next key now. Conflict when it has not been published for the JWKS max-age yet. */
  async rotate(projectId: string): Promise<KeyView[]> {
    // Generated only once the rotation is allowed, and reused if the swap has to be retried.
    let pending: Promise<SigningKeyRecord> | undefined;
    await this.#swap(projectId, async (set) => {
      const readyAt = nextKeyReadyAt(set, this.jwksMaxAge);
      if (this.#o.now() < readyAt) {
        throw new AppError(
          "conflict",
          `The next key has been published for less than the JWKS max-age (${this.jwksMaxAge} s); rotate again after ${new Date(readyAt).toISOString()}.`,
        );
      }
      pending ??= this.#generate(projectId, "next");
      const now = this.#o.now();
      const rotated = rotateKeySet(set, { ...(await pending), createdAt: now }, now, this.jwksMaxAge);
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
      if (target === undefined) throw new AppError("not_found", `No key with kid '${kid}' exists.`);
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
    return { jwksKeys: set.keys.length, nextRotationAt: scheduledRotationAt(set, this.#o.rotationPeriod, this.jwksMaxAge) };
  }

  /** Public metadata of every key of the project. */
  async list(projectId: string): Promise<KeyView[]> {
    const set = await this.#read(projectId);
    return keyViews(set, scheduledRotationAt(set, this.#o.rotationPeriod, this.jwksMaxAge));
  }


  /** One maintenance pass over every loaded project: pick up outside changes, rotate, prune. */
  async tick(): Promise<void> {
    if (this.#ticking) return;
    this.#ticking = true;
    try {
      for (const projectId of this.#loaded.keys()) {
        try {
          await this.#maintain(projectId);
        } catch (error) {
          this.#o.logger.error("key maintenance failed", { error: (error as Error).message });
        }
      }
    } finally {
      this.#ticking = false;
    }
  }

  /** Starts the maintenance timer (twice a second: outside changes are served within a second). */
  start(intervalMs = 500): void {
    this.#timer ??= setInterval(() => void this.tick(), intervalMs);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
