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
/** Sorts after every used-jti entry of the project expiring before `at`, and before every other one. */
const jtiExpiringBefore = (projectId: string, at: number) => `jtiexp:${projectId}:${String(at).padStart(15, "0")}`;

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
  /** A used assertion jti → its expiry (epoch ms). */
  assertionJti: (projectId: string, clientId: string, jti: string) => `jti:${projectId}:${clientId}:${jti}`,
  /** The same entry ordered by expiry (zero-padded ms first), so expired ones are one range scan. */
  assertionJtiExpiry: (projectId: string, expiresAt: number, clientId: string, jti: string) =>
    `${jtiExpiringBefore(projectId, expiresAt)}:${clientId}:${jti}`,
  assertionJtiExpiriesOf: (projectId: string) => `jtiexp:${projectId}:`,
  assertionJtiExpiringBefore: jtiExpiringBefore,
  apiKey: (projectId: string, id: string) => `apikey:${projectId}:${id}`,
  apiKeysOf: (projectId: string) => `apikey:${projectId}:`,
  apiKeyHash: (hash: string) => `apikeyhash:${hash}`,
  keySet: (projectId: string) => `keyset:${projectId}`,
  /** A revoked token's jti → its `expiresAt`. */
  revoked: (projectId: string, jti: string) => `revoked:${projectId}:${jti}`,
  /** The same entry ordered by expiry, for pruning: a range up to `revokedUntil(now)` is what has expired. */
  revokedExpiry: (projectId: string, expiresAt: number, jti: string) => `revokedexp:${projectId}:${epochKey(expiresAt)}:${jti}`,
  revokedExpiriesOf: (projectId: string) => `revokedexp:${projectId}:`,
  /** Exclusive end of the expiry entries of a project at or before `now`. */
  revokedUntil: (projectId: string, now: number) => `revokedexp:${projectId}:${epochKey(now)}:\uffff`,
  /** The change counter every write transaction bumps (Store#changeSeq). */
  changeSeq: "changeseq",
};
