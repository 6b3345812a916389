/**
 * @module store/lmdb/lmdb-keys
 * The key layout of the LMDB backend. Every record kind has its own prefix with the project
 * first, so a listing is one range scan and never crosses projects. Ids are UUIDv7, so a range
 * lists in creation order.
 */

/** Last key of any string range starting with `prefix`. */
export const rangeEnd = (prefix: string) => `${prefix}\uffff`;

export const key = {
  meta: (name: string) => `meta:${name}`,
  project: (id: string) => `project:${id}`,
  provider: (projectId: string, id: string) => `provider:${projectId}:${id}`,
  providersOf: (projectId: string) => `provider:${projectId}:`,
  client: (projectId: string, providerId: string, id: string) => `client:${projectId}:${providerId}:${id}`,
  clientsOf: (projectId: string, providerId: string) => `client:${projectId}:${providerId}:`,
  /** Client id → provider id, written and removed with the client: lookups by client id alone. */
  clientIndex: (projectId: string, id: string) => `clientid:${projectId}:${id}`,
  secret: (projectId: string, clientId: string, id: string) => `secret:${projectId}:${clientId}:${id}`,
  secretsOf: (projectId: string, clientId: string) => `secret:${projectId}:${clientId}:`,
  apiKey: (projectId: string, id: string) => `apikey:${projectId}:${id}`,
  apiKeysOf: (projectId: string) => `apikey:${projectId}:`,
  apiKeyHash: (hash: string) => `apikeyhash:${hash}`,
  keySet: (projectId: string) => `keyset:${projectId}`,
  /** The change counter every write transaction bumps (Store#changeSeq). */
  changeSeq: "changeseq",
};
