/**
 * @module store/lmdb/lmdb-upgrade
 * In-place upgrades of the LMDB layout that need no new data format: additions that older
 * builds ignore, filled in when a writable store opens. Each is idempotent, and it writes
 * nothing when there is nothing to add.
 */
import type { ClientRecord } from "../store.ts";
import { key, rangeEnd } from "./lmdb-keys.ts";

/** The part of an lmdb environment the upgrades use. */
interface UpgradeTarget {
  get(key: string): unknown;
  getRange(options: { start: string; end: string }): Iterable<{ value: unknown }>;
  putSync(key: string, value: unknown): unknown;
  transactionSync<T>(action: () => T): T;
}

/**
 * Writes the client-id index (`clientid:<projectId>:<clientId>` → providerId) of clients stored
 * by a build that did not keep it, so the token endpoint finds them. One read scan per open; a
 * write transaction only when a client lacks its index.
 */
export function indexUnindexedClients(db: UpgradeTarget): number {
  const unindexed = (): ClientRecord[] => {
    const found: ClientRecord[] = [];
    for (const { value } of db.getRange({ start: key.allClients(), end: rangeEnd(key.allClients()) })) {
      const client = value as ClientRecord;
      if (db.get(key.clientIndex(client.projectId, client.id)) === undefined) found.push(client);
    }
    return found;
  };
  if (unindexed().length === 0) return 0;
  // Checked again inside the transaction: another process may have indexed or deleted meanwhile.
  return db.transactionSync(() => {
    const missing = unindexed();
    for (const client of missing) db.putSync(key.clientIndex(client.projectId, client.id), client.providerId);
    return missing.length;
  });
}
