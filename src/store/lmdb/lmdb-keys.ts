/**
 * @module store/lmdb/lmdb-keys
 * The key layout of the LMDB backend. Every record kind has its own prefix with the project
 * first, so a listing is one range scan and never crosses projects. Ids are UUIDv7, so a range
 * lists in creation order.
 */

/** Last key of any string range starting with `prefix`. */
export const rangeEnd = (prefix: string) => `${prefix}\uffff`;

/** An epoch-ms instant as a fixed-width string, so string order is time order. */
const epochKey = (ms: number) => String(Math.max(0, Math.floor(ms))).padStart(16, "0");

/**
 * Kinds of entries that matter only until an instant: a revoked token's jti (until the token's
 * `exp`) and a used client-assertion jti (until the assertion's `exp`). Each entry is kept twice:
 * by id (value: its expiry), and in an expiry index (value: its id), so expired ones are one range
 * scan from the start of the index.
 */
export const EXPIRING_KINDS = ["revoked", "jti"] as const;
export type ExpiringKind = (typeof EXPIRING_KINDS)[number];

export const key = {
  meta: (name: string) => `meta:${name}`,
  project: (id: string) => `project:${id}`,
  /** Slug → project id and custom domain → project id: both unique on the instance. */
  projectSlug: (slug: string) => `projectslug:${slug}`,
  projectDomain: (domain: string) => `projectdomain:${domain}`,
  provider: (projectId: string, id: string) => `provider:${projectId}:${id}`,
  providersOf: (projectId: string) => `provider:${projectId}:`,
  client: (projectId: string, providerId: string, id: string) => `client:${projectId}:${providerId}:${id}`,
  clientsOf: (projectId: string, providerId: string) => `client:${projectId}:${providerId}:`,
  /** Client id → provider id, written and removed with the client: lookups by client id alone. */
  clientIndex: (projectId: string, id: string) => `clientid:${projectId}:${id}`,
  secret: (projectId: string, clientId: string, id: string) => `secret:${projectId}:${clientId}:${id}`,
  secretsOf: (projectId: string, clientId: string) => `secret:${projectId}:${clientId}:`,
  clientJwks: (projectId: string, clientId: string) => `clientjwks:${projectId}:${clientId}`,
  apiKey: (projectId: string, id: string) => `apikey:${projectId}:${id}`,
  apiKeysOf: (projectId: string) => `apikey:${projectId}:`,
  apiKeyHash: (hash: string) => `apikeyhash:${hash}`,
  keySet: (projectId: string) => `keyset:${projectId}`,
  /** An expiring entry by id → its expiry (epoch ms). A used assertion's id is `<client id>:<jti>`. */
  expiring: (kind: ExpiringKind, projectId: string, id: string) => `${kind}:${projectId}:${id}`,
  /** Every expiring entry of a kind, of every project. */
  expiringOf: (kind: ExpiringKind) => `${kind}:`,
  /** The same entry in the expiry index → its id. */
  expiryIndex: (kind: ExpiringKind, projectId: string, expiresAt: number, id: string) => `${kind}exp:${projectId}:${epochKey(expiresAt)}:${id}`,
  expiryIndexOf: (kind: ExpiringKind, projectId: string) => `${kind}exp:${projectId}:`,
  /** Exclusive end of the index entries of a project that have expired at `now` (expiry ≤ now). */
  expiredBy: (kind: ExpiringKind, projectId: string, now: number) => `${kind}exp:${projectId}:${epochKey(now)}:\uffff`,
  /** The change counter every write transaction bumps (Store#changeSeq). */
  changeSeq: "changeseq",
  /** The counter of writes to projects and key sets (Store#keysChangeSeq). */
  keysChangeSeq: "keyschangeseq",
  /**
   * The change counter as of the latest counted write of a process that keeps the keys log: when
   * it is not the change counter, a process that keeps none (an earlier build) wrote since.
   */
  keysLogged: "keyslogged",
  /** The write that brought keysChangeSeq to `seq` → what it wrote (KeysLogEntry). */
  keysLog: (seq: number) => `keyslog:${String(seq).padStart(16, "0")}`,
};
