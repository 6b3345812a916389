/**
 * Data files the service's user cannot write (a command run once as root left a lock file of its
 * own, a directory or file made read-only): every command, `check` included, stops with one line
 * naming the file, never a crash, and `check` passes only where `serve` would start.
 *
 * The commands run as an unprivileged user (`setpriv`, uid 65534), which needs root: elsewhere
 * the test is skipped.
 */
import { afterEach, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LMDB_FILE } from "../../src/store/lmdb/lmdb-store.ts";
import { BUN, cleanup, freePort, newMasterKey, processEnv, REPO_ROOT, tempDataDir } from "./process.ts";

afterEach(cleanup);

const NOBODY = 65534;
const canSwitchUser = process.platform === "linux" && process.getuid?.() === 0 && Bun.which("setpriv") !== null;

interface Run {
  code: number;
  lines: string[];
}

/** Runs a tokenmint command as root, or as the unprivileged user. */
function run(args: string[], env: Record<string, string>, asNobody: boolean): Run {
  const user = asNobody ? ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"] : [];
  const result = Bun.spawnSync([...user, BUN, "src/main.ts", ...args], { cwd: REPO_ROOT, env, stdout: "pipe", stderr: "pipe", timeout: 15_000 });
  const lines = result.stderr.toString().split("\n").filter((line) => line !== "");
  return { code: result.exitCode ?? -1, lines };
}

/** A data directory and master key file of the unprivileged user, and the settings for them. */
function nobodysData(settings: Record<string, string>): { dataDir: string; env: Record<string, string> } {
  const root = tempDataDir();
  chmodSync(root, 0o755);
  const dataDir = join(root, "data");
  mkdirSync(dataDir, { mode: 0o700 });
  chownSync(dataDir, NOBODY, NOBODY);
  const keyFile = join(root, "master-key");
  writeFileSync(keyFile, `${newMasterKey()}\n`, { mode: 0o600 });
  chownSync(keyFile, NOBODY, NOBODY);
  const env = processEnv({
    TOKENMINT_DATA_DIR: dataDir,
    TOKENMINT_MASTER_KEY_FILE: keyFile,
    TOKENMINT_HOST: "127.0.0.1",
    // The runtime's own cache, where the unprivileged user may write.
    HOME: root,
    BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0",
    ...settings,
  });
  return { dataDir, env };
}

test.skipIf(!canSwitchUser)("files the service's user cannot write: every command says which, in one line, and check fails where serve would", () => {
  const { dataDir, env } = nobodysData({ TOKENMINT_WORKERS: "1" });
  const lockFile = join(dataDir, `${LMDB_FILE}-lock`);
  const dataFile = join(dataDir, LMDB_FILE);
  const asNobody = (args: string[]) => run(args, env, true);

  // The service's user makes the data; root then runs check on it while no lock file is there.
  expect(asNobody(["apikeys", "create", "--name", "ops"]).code).toBe(0);
  rmSync(lockFile);
  expect(run(["check"], env, false).code).toBe(0);
  expect(existsSync(lockFile)).toBe(true);

  const refusedWith = (args: string[], message: string) => {
    const { code, lines } = asNobody(args);
    expect({ args, code, lines }).toEqual({ args, code: 1, lines: [`tokenmint: cannot open the data directory ${dataDir}: ${message}`] });
  };
  const lockMessage = `${lockFile} cannot be read and written by this user (give it to the service's user)`;
  refusedWith(["keys", "list"], lockMessage);
  refusedWith(["check"], lockMessage);

  chownSync(lockFile, NOBODY, NOBODY);
  expect(asNobody(["check"]).code).toBe(0);

  // A data directory the server cannot write its serve.pid in.
  chmodSync(dataDir, 0o500);
  refusedWith(["check"], `${dataDir} cannot be written by this user (the server writes serve.pid there)`);
  chmodSync(dataDir, 0o700);

  // A data file made read-only.
  chmodSync(dataFile, 0o400);
  refusedWith(["check"], `${dataFile} cannot be read and written by this user (give it to the service's user)`);
  refusedWith(["apikeys", "list"], `${dataFile} cannot be read and written by this user (give it to the service's user)`);
  chmodSync(dataFile, 0o600);
  expect(asNobody(["check"]).code).toBe(0);

  // The open guard's files, made by a command run as root on data without them: the service's
  // user would otherwise write unguarded, silently.
  for (const suffix of ["-open", "-open-intent"]) {
    const guardFile = `${dataFile}${suffix}`;
    rmSync(guardFile);
    expect(run(["apikeys", "create", "--name", `root${suffix}`], env, false).code).toBe(0);
    refusedWith(["apikeys", "list"], `${guardFile} cannot be read and written by this user (give it to the service's user)`);
    chownSync(guardFile, NOBODY, NOBODY);
  }
  expect(asNobody(["apikeys", "list"]).code).toBe(0);
}, 60_000);

test.skipIf(!canSwitchUser)("serve, too, stops with one line on a lock file the service's user cannot write", async () => {
  const { dataDir, env } = nobodysData({ TOKENMINT_PORT: String(await freePort()) });
  expect(run(["apikeys", "create", "--name", "ops"], env, true).code).toBe(0);
  const lockFile = join(dataDir, `${LMDB_FILE}-lock`);
  chownSync(lockFile, 0, 0);
  for (const workers of ["1", "2"]) {
    const { code, lines } = run(["serve"], { ...env, TOKENMINT_WORKERS: workers }, true);
    expect({ workers, code, lines }).toEqual({
      workers,
      code: 1,
      lines: [`tokenmint: cannot open the data directory ${dataDir}: ${lockFile} cannot be read and written by this user (give it to the service's user)`],
    });
  }
}, 60_000);
