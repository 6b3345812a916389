/**
 * @module keys/sealing
 * At-rest encryption of private keys: AES-256-GCM under the master key, with the owner of the
 * secret bound in as additional authenticated data, so a sealed key cannot be moved to another
 * project or kid. Also the master-key check value that tells a wrong master key at start-up.
 */
import { base64url } from "jose";

const CHECK_PLAINTEXT = "tokenmint master key check v1";
const CHECK_AAD = "tokenmint:master-key-check";
const encoder = new TextEncoder();

/** Imports 32 raw bytes as the AES-256-GCM master key (not extractable). */
export function importMasterKey(raw: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  if (raw.byteLength !== 32) throw new Error("the master key must be exactly 32 bytes");
  return crypto.subtle.importKey("raw", raw, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]);
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
  const plain = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: bytes.subarray(0, 12), additionalData: encoder.encode(aad) },
    masterKey,
    bytes.subarray(12),
  );
  return new TextDecoder().decode(plain);
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
