/**
 * @module core/secret-hash
 * How high-entropy secrets (API keys, client secrets) are stored and checked: a SHA-256, compared
 * in constant time.
 */
import { base64url } from "jose";

const encoder = new TextEncoder();

/**
 * base64url SHA-256 of a high-entropy secret (API keys, client secrets). A plain hash suffices:
 * the secrets are 256 random bits, so there is nothing for a slow password hash to protect.
 */
export async function hashSecret(secret: string): Promise<string> {
  return base64url.encode(new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(secret))));
}

/** Constant-time equality of two strings of equal length (different lengths are unequal). */
export function timingSafeEqual(a: string, b: string): boolean {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < x.length; i++) diff |= (x[i] as number) ^ (y[i % y.length] ?? 0);
  return diff === 0;
}
