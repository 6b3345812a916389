/**
 * `restore` and the signing keys revoked since the backup: a retired key revoked after it stays
 * out of the JWKS, while a retired key the replaced data never knew (restored onto older data)
 * stays in. What restores killed before their rename left is removed, and nothing else. In
 * process, on a fake clock; test/e2e/backup.test.ts runs the executable.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { open } from "lmdb";
import { parseArgs } from "../../src/cli/args.ts";
import { restoreCommand } from "../../src/cli/restore.ts";
import { loadConfig } from "../../src/config/load.ts";
import { generateMasterKeyText } from "../../src/keys/master-key.ts";
import { LMDB_FILE, openLmdbFileReadOnly } from "../../src/store/lmdb/lmdb-store.ts";
import { buildTestApp, deadPid, FakeClock, tempDir, type TestApp } from "../helpers/app.ts";

const dirs: { remove: () => void }[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

const newDir = () => {
  const dir = tempDir();
  dirs.push(dir);
  return dir.path;
};

interface Key {
  kid: string;
  state: string;
}

const jwksKids = async (t: TestApp) => ((await (await t.request("GET", "/.well-known/jwks")).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
const keys = async (t: TestApp) => ((await (await t.api("GET", "/v1/keys")).json()) as { items: Key[] }).items;

/** Rotates once the next key has been published for the JWKS max-age (300 s). */
async function rotate(t: TestApp): Promise<void> {
  t.clock.advance(301);
  expect((await t.api("POST", "/v1/keys/rotate")).status).toBe(200);
}

/** Runs `restore FILE --json` on `dataDir` (no server on it); returns its JSON and stderr. */
async function restore(dataDir: string, masterKey: string, file: string, clock: FakeClock): Promise<{ json: Record<string, unknown>; err: string[] }> {
  const config = loadConfig({ TOKENMINT_DATA_DIR: dataDir, TOKENMINT_MASTER_KEY: masterKey, TOKENMINT_SIGNING_ALG: "ES256", TOKENMINT_PUBLIC_URL: "https://tokens.example.test" });
  const out: string[] = [];
  const err: string[] = [];
  await restoreCommand(config, parseArgs(["restore", file, "--json"]), { out: (line) => out.push(line), err: (line) => err.push(line) }, clock);
  return { json: JSON.parse(out.join("")) as Record<string, unknown>, err };
}

/** A clock, an empty data directory, a master key, and where a backup of that data goes. */
function fresh(): { clock: FakeClock; dataDir: string; masterKey: string; file: string } {
  return { clock: new FakeClock(), dataDir: newDir(), masterKey: generateMasterKeyText(), file: join(newDir(), "backup.mdb") };
}

test("a retired key revoked after the backup stays out of the JWKS once the backup is restored", async () => {
  const { clock, dataDir, masterKey, file } = fresh();
  let t = await buildTestApp({ clock, dataDir, masterKey });
  await rotate(t);
  const retired = (await keys(t)).find((k) => k.state === "retired")?.kid as string;
  expect(await jwksKids(t)).toContain(retired);
  await t.ctx.store.backup(file);
  clock.advance(10);
  expect((await t.api("POST", `/v1/keys/${retired}/revoke`)).status).toBe(200);
  const served = await jwksKids(t);
  expect(served).not.toContain(retired);
  await t.close();

  const { json, err } = await restore(dataDir, masterKey, file, clock);
  expect(json).toMatchObject({ kept: { signingKeys: 0, revocations: 1 } });
  expect(err).toEqual([
    "Kept from the data replaced: the signing keys of 0 project(s) where newer than the backup's, and 1 revocation(s) of signing keys, API keys, tokens and clients' tokens made since the backup.",
  ]);
  t = await buildTestApp({ clock, dataDir, masterKey });
  try {
    expect(await jwksKids(t)).toEqual(served);
    expect((await keys(t)).map((k) => k.kid)).not.toContain(retired);
  } finally {
    await t.close();
  }
});

test("restored onto older data, retired keys that data never published stay in the JWKS", async () => {
  const clock = new FakeClock();
  const masterKey = generateMasterKeyText();
  const backups = newDir();
  const [older, newer] = [join(backups, "older.mdb"), join(backups, "newer.mdb")];
  const primary = await buildTestApp({ clock, dataDir: newDir(), masterKey });
  let standby: TestApp | undefined;
  try {
    await primary.ctx.store.backup(older);
    // Three rotations: the keys current and next at the older backup retire, and so does the first key made after it.
    for (let i = 0; i < 3; i++) await rotate(primary);
    const published = await jwksKids(primary);
    expect((await keys(primary)).filter((k) => k.state === "retired")).toHaveLength(3);
    await primary.ctx.store.backup(newer);

    const standbyDir = newDir();
    expect((await restore(standbyDir, masterKey, older, clock)).json).toMatchObject({ kept: { signingKeys: 0, revocations: 0 } });
    const { json, err } = await restore(standbyDir, masterKey, newer, clock);
    expect({ json, err }).toMatchObject({ json: { kept: { signingKeys: 0, revocations: 0 } }, err: [] });
    standby = await buildTestApp({ clock, dataDir: standbyDir, masterKey });
    expect(await jwksKids(standby)).toEqual(published);
  } finally {
    await standby?.close();
    await primary.close();
  }
});

/** Marks the data file at `path` format 1, as an earlier version would have left it. */
async function markFormat1(path: string): Promise<void> {
  const db = open({ path, encoding: "json", compression: false });
  await db.put("meta:format", 1);
  await db.close();
}

/** The format of the data in `dataDir`, and the private halves of its default project's retired keys. */
async function restoredData(dataDir: string): Promise<{ format: number | undefined; retiredPrivate: (string | undefined)[] }> {
  const restored = openLmdbFileReadOnly(join(dataDir, LMDB_FILE));
  try {
    const set = await restored.getKeySet((await restored.getMeta<string>("defaultProjectId")) as string);
    return { format: await restored.getMeta<number>("format"), retiredPrivate: (set?.keys ?? []).filter((k) => k.state === "retired").map((k) => k.sealedPrivateJwk) };
  } finally {
    await restored.close();
  }
}

test("a backup of format 1 restored with the newer key set of the data replaced is marked format 2, as that set was written", async () => {
  const { clock, dataDir, masterKey, file } = fresh();
  let t = await buildTestApp({ clock, dataDir, masterKey });
  await t.ctx.store.backup(file);
  await markFormat1(file);
  await rotate(t);
  const published = await jwksKids(t);
  await t.close();

  const { json, err } = await restore(dataDir, masterKey, file, clock);
  // It says so: versions of format 1 refuse the data it leaves.
  expect(json).toMatchObject({ format: 2, kept: { signingKeys: 1, revocations: 0 } });
  expect(err.filter((line) => line.startsWith("The backup's data was of format 1;"))).toHaveLength(1);
  expect(err.join("\n")).toContain("so the restored data is of format 2: versions that read only format 1 refuse it");
  expect(await restoredData(dataDir)).toEqual({ format: 2, retiredPrivate: [undefined] });
  t = await buildTestApp({ clock, dataDir, masterKey });
  try {
    expect(await jwksKids(t)).toEqual(published);
  } finally {
    await t.close();
  }
});

test("a backup of format 1 restored onto data of format 1 stays format 1", async () => {
  const { clock, dataDir, masterKey, file } = fresh();
  const t = await buildTestApp({ clock, dataDir, masterKey });
  await t.ctx.store.backup(file);
  await t.close();
  for (const path of [file, join(dataDir, LMDB_FILE)]) await markFormat1(path);
  const { json, err } = await restore(dataDir, masterKey, file, clock);
  expect({ json, err }).toMatchObject({ json: { format: 1, kept: { signingKeys: 0, revocations: 0 } }, err: [] });
  expect((await restoredData(dataDir)).format).toBe(1);
});

test("a restore removes the staged copies and lock files restores killed before their rename left, and nothing else", async () => {
  const { clock, dataDir, masterKey, file } = fresh();
  const t = await buildTestApp({ clock, dataDir, masterKey });
  await t.ctx.store.backup(file);
  await t.close();
  const dead = await deadPid();
  // A restore still running elsewhere: its staged copy is in use.
  const live = Bun.spawn(["sleep", "30"]);
  try {
    const staged = (pid: number | string) => `.${LMDB_FILE}.restore-${pid}`;
    // Killed restores': one with a dead pid, one whose pid this process got since.
    const leftovers = [staged(dead), `${staged(dead)}-lock`, staged(process.pid), `${staged(process.pid)}-lock`];
    const kept = [
      staged(live.pid),
      `${staged(live.pid)}-lock`,
      // Not a restore's name as it writes it: no pid, a leading zero, a sign, another suffix or file.
      staged(""),
      staged(`0${dead}`),
      staged(`+${dead}`),
      staged(`${dead}.old`),
      staged(`${dead}-lock-lock`),
      `.other.mdb.restore-${dead}`,
      `${LMDB_FILE}.restore-${dead}`,
      "notes.txt",
    ];
    for (const name of [...leftovers, ...kept]) writeFileSync(join(dataDir, name), "left");
    // One that cannot be removed is left, and the restore goes on.
    const stuck = staged(await deadPid());
    mkdirSync(join(dataDir, stuck));

    expect((await restore(dataDir, masterKey, file, clock)).json).toMatchObject({ kept: { signingKeys: 0, revocations: 0 } });
    const names = readdirSync(dataDir);
    for (const name of leftovers) expect(names).not.toContain(name);
    for (const name of [...kept, stuck, LMDB_FILE]) expect(names).toContain(name);
  } finally {
    live.kill();
  }
});
