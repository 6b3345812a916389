/**
 * @module keys/master-key
 * Finds the master key that seals signing keys at rest, in this order: TOKENMINT_MASTER_KEY,
 * TOKENMINT_MASTER_KEY_FILE, `$CREDENTIALS_DIRECTORY/master-key`, `<data-dir>/master.key`.
 * A key is generated (mode 0600, with a warning) only at the default path and only while the data
 * holds no sealed keys yet; an existing key is never replaced.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { base64url } from "jose";
import type { Config } from "../config/schema.ts";
import { partialPathFor, placeFile } from "../runtime/durable-files.ts";

/** A problem with the master key that must stop start-up. */
export class MasterKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MasterKeyError";
  }
}

export interface MasterKeySource {
  raw: Uint8Array<ArrayBuffer>;
  /** Where it came from, for logs: never the key itself. */
  origin: string;
  generated: boolean;
  /** The file's mode when users other than its owner (and its group, for reading) may read or change it. */
  looseMode?: number;
}

/** Decodes a base64url master key, demanding exactly 32 bytes. */
export function decodeMasterKey(text: string, origin: string): Uint8Array<ArrayBuffer> {
  let raw: Uint8Array<ArrayBuffer>;
  try {
    raw = base64url.decode(text.trim()) as Uint8Array<ArrayBuffer>;
  } catch {
    // `openssl rand -base64 32` is the usual slip: say what to use instead.
    const hint = /[+/]/.test(text) ? ": it looks like standard base64 ('+', '/'); use base64url ('-', '_'), e.g. openssl rand 32 | basenc --base64url | tr -d '='" : "";
    throw new MasterKeyError(`the master key from ${origin} is not valid base64url${hint}`);
  }
  if (raw.byteLength !== 32) {
    throw new MasterKeyError(`the master key from ${origin} must decode to 32 bytes, got ${raw.byteLength}`);
  }
  return raw;
}

/** Encodes 32 fresh random bytes as a master key string. */
export const generateMasterKeyText = () => base64url.encode(crypto.getRandomValues(new Uint8Array(32)));

/** The file the master key is read from (when not in TOKENMINT_MASTER_KEY), and the default one. */
function masterKeyPath(config: Config): { path: string; fallback: string } {
  const credential = config.credentialsDirectory !== undefined ? join(config.credentialsDirectory, "master-key") : undefined;
  const fallback = join(config.dataDir, "master.key");
  return { path: config.masterKeyFile ?? (credential !== undefined && existsSync(credential) ? credential : fallback), fallback };
}

/**
 * Throws, as `resolveMasterKey` would, for a configured master key that cannot be used: a
 * malformed key, a named file that is missing, unreadable or malformed. Writes nothing, so it runs
 * before the data directory is opened. A key yet to be generated at the default path passes.
 */
export function checkMasterKeySource(config: Config): void {
  if (config.masterKey !== undefined) {
    decodeMasterKey(config.masterKey, "TOKENMINT_MASTER_KEY");
    return;
  }
  const { path, fallback } = masterKeyPath(config);
  if (existsSync(path)) readKeyFile(path);
  else if (path !== fallback) throw new MasterKeyError(`the master key file ${path} does not exist`);
}

/**
 * Resolves the master key for `config`. `dataHasKeys` says whether the store already holds keys
 * sealed with some master key (then nothing is ever generated); `holder` names that store.
 */
export function resolveMasterKey(config: Config, dataHasKeys: boolean, holder = "the data directory"): MasterKeySource {
  if (config.masterKey !== undefined) {
    return { raw: decodeMasterKey(config.masterKey, "TOKENMINT_MASTER_KEY"), origin: "TOKENMINT_MASTER_KEY", generated: false };
  }
  const { path, fallback } = masterKeyPath(config);
  if (existsSync(path)) return { raw: readKeyFile(path), origin: path, generated: false, looseMode: looseMode(path) };
  if (path !== fallback) throw new MasterKeyError(`the master key file ${path} does not exist`);
  if (dataHasKeys) {
    throw new MasterKeyError(
      `no master key found (looked for ${path}) but ${holder} holds sealed signing keys: restore the master key that sealed them`,
    );
  }
  try {
    if (!writeKeyFile(path, `${generateMasterKeyText()}\n`)) {
      // Another process (the CLI beside a starting server) generated it first: use that one.
      return { raw: readKeyFile(path), origin: path, generated: false, looseMode: looseMode(path) };
    }
  } catch (error) {
    throw new MasterKeyError(`cannot write the master key to ${path}: ${(error as Error).message}`);
  }
  return { raw: readKeyFile(path), origin: path, generated: true };
}

/**
 * Writes a new key file at `path` (mode 0600) unless one exists there; false when one does. The
 * key is written under a temporary name beside it and flushed, then put in place and the
 * directory flushed: whenever `path` exists, it holds the whole key on disk, before anything is
 * sealed with it (a crash or a power loss never leaves an empty or missing key beside keys it sealed).
 */
function writeKeyFile(path: string, text: string): boolean {
  // What a generation killed before removing its temporary name left goes: a key never used, or
  // a second name of the key in place (killed between the link and the removal).
  const partial = partialPathFor(path);
  try {
    const fd = openSync(partial, "wx", 0o600);
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    return placeFile(partial, path);
  } finally {
    rmSync(partial, { force: true });
  }
}

/**
 * The mode of a key file that others may read, or anyone but its owner may change (a group may
 * read: `root:tokenmint 0640` is a usual way to hand it to the service); undefined when it is kept
 * close, or cannot be told.
 */
function looseMode(path: string): number | undefined {
  try {
    const mode = statSync(path).mode & 0o777;
    return mode & 0o027 ? mode : undefined;
  } catch {
    return undefined;
  }
}

function readKeyFile(path: string): Uint8Array<ArrayBuffer> {
  let text: string;
  try {
    // Only a file: reading a named pipe would wait for a writer, and start-up with it.
    const stats = statSync(path);
    if (!stats.isFile()) throw new Error(`it is ${stats.isDirectory() ? "a directory" : stats.isFIFO() ? "a named pipe" : "not a regular file"}`);
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new MasterKeyError(`cannot read the master key file ${path}: ${(error as Error).message}`);
  }
  return decodeMasterKey(text, path);
}
