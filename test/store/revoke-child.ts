/**
 * A child process for the freshness test of isTokenRevoked (contract-changes.ts): opens the
 * store, revokes one token, and exits once the write is committed.
 * Usage: bun revoke-child.ts <dataDir> <projectId> <jti> <expiresAt> <now>
 */
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";

const [dataDir, projectId, jti, expiresAt, now] = process.argv.slice(2) as [string, string, string, string, string];
const store = openLmdbStore(dataDir);
await store.revokeToken(projectId, jti, Number(expiresAt), Number(now));
await store.close();
process.exit(0);
