/**
 * @module core/secret-hash
 * How high-entropy secrets (API keys, client secrets) are stored and checked: a SHA-256, compared
 * in constant time.
 */
import { hash } from "node:crypto";

/**
 * base64url SHA-256 of a high-entropy secret (API keys, client secrets). A plain hash suffices:
 * the secrets are 256 random bits (the operator's bootstrap API key must be random too, see
 * config/schema.ts), so there is nothing for a slow password hash to protect.
 * Synchronous: every API-key request and every client-secret authentication hashes once, and the
 * hash of a short string costs less than the round trip of an asynchronous digest.
 */
export function hashSecret(secret: string): string {
  // One-shot: no Hash object per call.
  return hash("sha256", secret, "base64url");
}

/**
 * Constant-time equality of two strings: the time depends only on the length of `a`, never on
 * where the strings differ. Strings of different lengths are unequal.
 */
export function timingSafeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  const last = Math.max(b.length - 1, 0);
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ (b.charCodeAt(Math.min(i, last)) || 0);
  return diff === 0;
}
