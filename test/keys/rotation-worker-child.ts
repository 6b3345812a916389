/**
 * A child process for the multi-process rotation test (rotation-workers.test.ts): a KeyService on
 * the shared data file, as each worker of `serve` runs one, with a clock the parent sets. Reads
 * lines from stdin: `tick <epoch ms>` sets the clock and runs one maintenance pass, then prints
 * `ticked`. Its log lines (JSON) go to stdout too.
 * Usage: bun rotation-worker-child.ts <dataDir> <masterKey> <projectId> <rotationPeriodS>
 */
import { KeyService } from "../../src/keys/key-service.ts";
import { decodeMasterKey } from "../../src/keys/master-key.ts";
import { importMasterKey } from "../../src/keys/sealing.ts";
import { SignerFactory } from "../../src/keys/signers/factory.ts";
import { createLogger } from "../../src/logging/logger.ts";
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";

const [dataDir, masterKeyText, projectId, period] = process.argv.slice(2) as [string, string, string, string];
let now = 0;
const store = openLmdbStore(dataDir);
const keys = new KeyService({
  store,
  masterKey: await importMasterKey(decodeMasterKey(masterKeyText, "test")),
  now: () => now,
  logger: createLogger("info", (line) => process.stdout.write(line), () => now),
  signingAlg: "ES256",
  rotationPeriod: Number(period),
  signers: new SignerFactory({ mode: "auto" }),
});

// The first tick loads the key set (which maintains it too); later ones are the timer's passes.
let loaded = false;
let pending = "";
for await (const chunk of process.stdin) {
  pending += Buffer.from(chunk).toString("utf8");
  for (let newline = pending.indexOf("\n"); newline !== -1; newline = pending.indexOf("\n")) {
    const [command, arg] = pending.slice(0, newline).split(" ");
    pending = pending.slice(newline + 1);
    if (command !== "tick") continue;
    now = Number(arg);
    if (loaded) await keys.tick();
    else await keys.load(projectId);
    loaded = true;
    process.stdout.write("ticked\n");
  }
}
await store.close();
process.exit(0);
