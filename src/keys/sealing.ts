/**
 * @module keys/sealing
 * At-rest encryption of private keys: AES-256-GCM under the master key, with the owner of the
 * secret bound in as additional authenticated data, so a sealed key cannot be moved to another
 * project or kid. Also the master-key check value that tells a wrong master key at start-up.
 *
 * Sealing goes through WebCrypto. Unsealing a key made by `importMasterKey` runs synchronously
 * through node:crypto on the same bytes: WebCrypto's decrypt waits for a worker thread, about
 * 150 µs a key against 10, and a process unseals one key per project as it starts and at the
 * first signature after each rotation. Both read and write the same format.
 */
import { createDecipheriv, createSecretKey, type KeyObject } from "node:crypto";
import { base64url } from "jose";

const CHECK_PLAINTEXT = "tokenmint master key check v1";
const CHECK_AAD = "tokenmint:master-key-check";
const encoder = new TextEncoder();

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The bytes of each master key `importMasterKey` made, as a node:crypto key, for `unseal`; held by this module only. */
const secretKeys = new WeakMap<CryptoKey, KeyObject>();

/** Imports 32 raw bytes as the AES-256-GCM master key (not extractable). */
export function importMasterKey(raw: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  if (raw.byteLength !== 32) throw new Error("the master key must be exactly 32 bytes");
  const secret = createSecretKey(raw);
  return crypto.subtle.importKey("raw", raw, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]).then((key) => {
    secretKeys.set(key, secret);
    return key;
  });
}

/** Encrypts `plaintext`; the result is base64url(iv || ciphertext+tag). */
export async function seal(masterKey: CryptoKey, plaintext: string, aad: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(
    await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(aad) }, masterKey, encoder.encode(plaintext)),
  );
  const out = new Uint8Array(iv.byteLength + sealed.byteLength);
  out.set(iv, 0);
  out.set(sealed, iv.byteLength);
  return base64url.encode(out);
}

/** Decrypts what `seal` produced; throws if the key or the AAD is wrong or the data was altered. */
export async function unseal(masterKey: CryptoKey, sealed: string, aad: string): Promise<string> {
  const bytes = base64url.decode(sealed) as Uint8Array<ArrayBuffer>;
  if (bytes.byteLength < IV_BYTES + TAG_BYTES) throw new Error("the sealed value is too short");
  const secret = secretKeys.get(masterKey);
  if (secret !== undefined) return unsealWith(secret, bytes, aad);
  const plain = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: bytes.subarray(0, IV_BYTES), additionalData: encoder.encode(aad) },
    masterKey,
    bytes.subarray(IV_BYTES),
  );
  return new TextDecoder().decode(plain);
}

/** `unseal` through node:crypto, synchronously. */
function unsealWith(secret: KeyObject, bytes: Uint8Array, aad: string): string {
  const tagAt = bytes.byteLength - TAG_BYTES;
  const decipher = createDecipheriv("aes-256-gcm", secret, bytes.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
  decipher.setAAD(encoder.encode(aad));
  decipher.setAuthTag(bytes.subarray(tagAt));
  const head = decipher.update(bytes.subarray(IV_BYTES, tagAt));
  // `final` throws unless the tag proves the key, the AAD and every byte right.
  const tail = decipher.final();
  return new TextDecoder().decode(tail.byteLength === 0 ? head : Buffer.concat([head, tail]));
}

/** AAD that binds a sealed private key to its project and kid. */
export const privateKeyAad = (projectId: string, kid: string) => `tokenmint:signing-key:${projectId}:${kid}`;

/** The value stored beside the data so a wrong master key is noticed before any key is used. */
export const createMasterKeyCheck = (masterKey: CryptoKey) => seal(masterKey, CHECK_PLAINTEXT, CHECK_AAD);

/** True when `check` was made with this master key. */
export async function verifyMasterKeyCheck(masterKey: CryptoKey, check: string): Promise<boolean> {
  try {
    return (await unseal(masterKey, check, CHECK_AAD)) === CHECK_PLAINTEXT;
  } catch {
    return false;
  }
}
