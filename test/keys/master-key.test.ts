import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { base64url } from "jose";
import { loadConfig } from "../../src/config/load.ts";
import { MasterKeyError, decodeMasterKey, generateMasterKeyText, resolveMasterKey } from "../../src/keys/master-key.ts";
import { deadPid, tempDir } from "../helpers/app.ts";

/** Four distinct valid keys, one per possible source. */
const KEY = {
  env: base64url.encode(new Uint8Array(32).fill(1)),
  file: base64url.encode(new Uint8Array(32).fill(2)),
  credential: base64url.encode(new Uint8Array(32).fill(3)),
  dataDir: base64url.encode(new Uint8Array(32).fill(4)),
};
const bytesOf = (text: string) => Array.from(base64url.decode(text));

let root: { path: string; remove: () => void };
let dataDir: string;
let credDir: string;
let explicitFile: string;

beforeEach(() => {
  root = tempDir("tokenmint-master-key-");
  dataDir = join(root.path, "data");
  credDir = join(root.path, "credentials");
  explicitFile = join(root.path, "explicit.key");
  mkdirSync(dataDir);
  mkdirSync(credDir);
});
afterEach(() => root.remove());

/** Config for the test directories; `sources` picks which settings are present. */
function config(sources: { env?: string; file?: string; credentials?: boolean }) {
  return loadConfig({
    TOKENMINT_DATA_DIR: dataDir,
    TOKENMINT_MASTER_KEY: sources.env,
    TOKENMINT_MASTER_KEY_FILE: sources.file,
    CREDENTIALS_DIRECTORY: sources.credentials ? credDir : undefined,
  });
}

function writeAllKeyFiles(): void {
  // Kept close, as they should be (see "key file modes" below for the others).
  writeFileSync(explicitFile, `${KEY.file}\n`, { mode: 0o600 });
  writeFileSync(join(credDir, "master-key"), KEY.credential, { mode: 0o400 });
  writeFileSync(join(dataDir, "master.key"), `${KEY.dataDir}\n`, { mode: 0o600 });
}

/** Runs `resolve`, which must throw a MasterKeyError; returns its message. */
function masterKeyError(resolve: () => unknown): string {
  try {
    resolve();
  } catch (error) {
    expect(error).toBeInstanceOf(MasterKeyError);
    return (error as Error).message;
  }
  throw new Error("expected a MasterKeyError");
}

describe("resolveMasterKey: source order", () => {
  test("TOKENMINT_MASTER_KEY wins over every file", () => {
    writeAllKeyFiles();
    const source = resolveMasterKey(config({ env: KEY.env, file: explicitFile, credentials: true }), true);
    expect(source.origin).toBe("TOKENMINT_MASTER_KEY");
    expect(source.generated).toBe(false);
    expect(Array.from(source.raw)).toEqual(bytesOf(KEY.env));
  });

  test("TOKENMINT_MASTER_KEY_FILE wins over the credential and the data directory", () => {
    writeAllKeyFiles();
    const source = resolveMasterKey(config({ file: explicitFile, credentials: true }), true);
    expect(source).toEqual({ raw: source.raw, origin: explicitFile, generated: false });
    expect(Array.from(source.raw)).toEqual(bytesOf(KEY.file));
  });

  test("$CREDENTIALS_DIRECTORY/master-key wins over the data directory", () => {
    writeAllKeyFiles();
    const source = resolveMasterKey(config({ credentials: true }), true);
    expect(source.origin).toBe(join(credDir, "master-key"));
    expect(Array.from(source.raw)).toEqual(bytesOf(KEY.credential));
  });

  test("<data-dir>/master.key is used last; an empty credentials directory falls through to it", () => {
    writeFileSync(join(dataDir, "master.key"), `${KEY.dataDir}\n`, { mode: 0o600 });
    for (const credentials of [false, true]) {
      const source = resolveMasterKey(config({ credentials }), true);
      expect(source).toEqual({ raw: source.raw, origin: join(dataDir, "master.key"), generated: false });
      expect(Array.from(source.raw)).toEqual(bytesOf(KEY.dataDir));
    }
  });
});

describe("resolveMasterKey: generation", () => {
  test("generates <data-dir>/master.key (mode 0600) when the data holds no keys, then reuses it", () => {
    const path = join(dataDir, "master.key");
    const first = resolveMasterKey(config({ credentials: true }), false);
    expect(first.generated).toBe(true);
    expect(first.origin).toBe(path);
    expect(first.raw.byteLength).toBe(32);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(credDir)).toEqual([]);
    // Written beside it under a temporary name first: nothing of that is left.
    expect(readdirSync(dataDir)).toEqual(["master.key"]);
    const second = resolveMasterKey(config({}), true);
    expect(second.generated).toBe(false);
    expect(Array.from(second.raw)).toEqual(Array.from(first.raw));
  });

  test("a key a killed generation left under its temporary name is removed; a running one's is kept", async () => {
    const killed = join(dataDir, `.master.key.${await deadPid()}.partial`);
    // pid 1 is alive in every pid namespace.
    const running = join(dataDir, ".master.key.1.partial");
    writeFileSync(killed, KEY.file, { mode: 0o600 });
    writeFileSync(running, KEY.credential, { mode: 0o600 });
    expect(resolveMasterKey(config({}), false).generated).toBe(true);
    expect(readdirSync(dataDir).sort()).toEqual([".master.key.1.partial", "master.key"]);
  });

  test("processes generating at once agree on one key: one writes it, the others read it whole", async () => {
    const script = `
      const { loadConfig } = await import(${JSON.stringify(join(import.meta.dir, "../../src/config/load.ts"))});
      const { resolveMasterKey } = await import(${JSON.stringify(join(import.meta.dir, "../../src/keys/master-key.ts"))});
      while (Date.now() < Number(process.env.GO)) {}
      const key = resolveMasterKey(loadConfig({ TOKENMINT_DATA_DIR: process.env.DIR }), false);
      console.log(JSON.stringify({ generated: key.generated, key: Buffer.from(key.raw).toString("hex") }));`;
    for (let round = 0; round < 2; round++) {
      const dir = join(root.path, `race-${round}`);
      mkdirSync(dir);
      const go = String(Date.now() + 700);
      const children = Array.from({ length: 6 }, () =>
        Bun.spawn([process.execPath, "-e", script], { env: { ...process.env, DIR: dir, GO: go }, stdout: "pipe", stderr: "pipe" }),
      );
      const results = await Promise.all(
        children.map(async (child) => {
          const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
          expect({ code, err }).toEqual({ code: 0, err: "" });
          return JSON.parse(out) as { generated: boolean; key: string };
        }),
      );
      expect(results.filter((r) => r.generated)).toHaveLength(1);
      expect(new Set(results.map((r) => r.key)).size).toBe(1);
      expect(readdirSync(dir)).toEqual(["master.key"]);
    }
  });

  test("refuses when the default file is missing but the data has keys, and writes nothing", () => {
    const message = masterKeyError(() => resolveMasterKey(config({ credentials: true }), true));
    expect(message).toContain(join(dataDir, "master.key"));
    expect(message).toContain("restore the master key");
    expect(readdirSync(dataDir)).toEqual([]);
  });

  test("refuses when an explicit file is missing, even for empty data, and generates nothing", () => {
    const message = masterKeyError(() => resolveMasterKey(config({ file: explicitFile }), false));
    expect(message).toBe(`the master key file ${explicitFile} does not exist`);
    expect(existsSync(explicitFile)).toBe(false);
    expect(readdirSync(dataDir)).toEqual([]);
  });
});

describe("resolveMasterKey: what is not a file", () => {
  test("a named pipe or a directory given as the key file is refused at once: start-up never waits on it", () => {
    const fifo = join(root.path, "pipe.key");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    // A writer that holds the pipe open for a while: reading it would wait that long, then find nothing.
    const writer = Bun.spawn(["sh", "-c", `exec 3<>'${fifo}'; sleep 5`]);
    try {
      expect(masterKeyError(() => resolveMasterKey(config({ file: fifo }), true))).toBe(`cannot read the master key file ${fifo}: it is a named pipe`);
    } finally {
      writer.kill();
    }
    expect(masterKeyError(() => resolveMasterKey(config({ file: dataDir }), true))).toBe(`cannot read the master key file ${dataDir}: it is a directory`);
  });
});

describe("resolveMasterKey: key file modes", () => {
  test("a file others may read, or others or its group may change, is reported with its mode; owner-only and group-readable files are not", () => {
    for (const [mode, loose] of [
      [0o600, undefined],
      [0o400, undefined],
      [0o640, undefined],
      [0o644, 0o644],
      [0o604, 0o604],
      [0o660, 0o660],
      [0o666, 0o666],
    ] as const) {
      writeFileSync(explicitFile, `${KEY.file}\n`);
      chmodSync(explicitFile, mode);
      expect({ mode, loose: resolveMasterKey(config({ file: explicitFile }), true).looseMode }).toEqual({ mode, loose });
    }
    // A key in the environment has no file mode.
    expect(resolveMasterKey(config({ env: KEY.env }), true).looseMode).toBeUndefined();
  });
});

describe("resolveMasterKey: bad key values", () => {
  const wrongLength = base64url.encode(new Uint8Array(31));
  const standardBase64 = Buffer.alloc(32, 0xfb).toString("base64");

  test("an env key that is not 32 bytes or not base64url (loadConfig refuses it first; see config tests)", () => {
    // As if the settings had not been checked.
    const unchecked = (env: string) => ({ ...config({}), masterKey: env });
    expect(masterKeyError(() => resolveMasterKey(unchecked(wrongLength), false))).toBe("the master key from TOKENMINT_MASTER_KEY must decode to 32 bytes, got 31");
    // Standard base64 (what `openssl rand -base64 32` prints) is named, with what to use instead.
    expect(masterKeyError(() => resolveMasterKey(unchecked(standardBase64), false))).toBe(
      "the master key from TOKENMINT_MASTER_KEY is not valid base64url: it looks like standard base64 ('+', '/'); use base64url ('-', '_'), e.g. openssl rand 32 | basenc --base64url | tr -d '='",
    );
    expect(masterKeyError(() => resolveMasterKey(unchecked("not*a*key"), false))).toBe("the master key from TOKENMINT_MASTER_KEY is not valid base64url");
    expect(() => config({ env: wrongLength })).toThrow("TOKENMINT_MASTER_KEY must decode to 32 bytes, got 31");
  });

  test("a key file that is not 32 bytes or not base64url; the file is never replaced", () => {
    writeFileSync(explicitFile, base64url.encode(new Uint8Array(33)));
    expect(masterKeyError(() => resolveMasterKey(config({ file: explicitFile }), false))).toContain("must decode to 32 bytes, got 33");
    const fallback = join(dataDir, "master.key");
    writeFileSync(fallback, "%%%");
    expect(masterKeyError(() => resolveMasterKey(config({}), false))).toBe(`the master key from ${fallback} is not valid base64url`);
    expect(Bun.file(fallback).size).toBe(3);
  });

  test("decodeMasterKey trims whitespace; generated keys decode to 32 bytes", () => {
    expect(Array.from(decodeMasterKey(`  ${KEY.env}\n`, "x"))).toEqual(bytesOf(KEY.env));
    const text = generateMasterKeyText();
    expect(text).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(decodeMasterKey(text, "x").byteLength).toBe(32);
  });
});
