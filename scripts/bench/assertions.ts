/**
 * The private_key_jwt load of the bench: a client key pair whose public half the bench registers,
 * and files of single-use client assertions (ES256, a fresh jti each) as `/oauth/token` form
 * bodies, one file per wrk thread. Each run gets its own files: a used jti is refused.
 */
import { generateKeyPairSync, randomUUID, sign, type KeyObject } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { CLIENT_ASSERTION_TYPE } from "../../src/core/oauth/client-assertion.ts";

export interface ClientKeyPair {
  privateKey: KeyObject;
  /** The public JWK to register (PUT .../jwks). */
  publicJwk: Record<string, unknown>;
}

/** A fresh P-256 key pair for the bench's client. */
export function clientKeyPair(): ClientKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return { privateKey, publicJwk: publicKey.export({ format: "jwk" }) as Record<string, unknown> };
}

const b64 = (text: string) => Buffer.from(text).toString("base64url");
const HEADER = b64(JSON.stringify({ alg: "ES256" }));

/** One assertion of `clientId` for `audience`, living ten minutes, as a token request's form body. */
export function assertionBody(key: KeyObject, clientId: string, audience: string, jti: string): string {
  const now = Math.floor(Date.now() / 1000);
  const payload = b64(JSON.stringify({ iss: clientId, sub: clientId, aud: audience, iat: now, exp: now + 600, jti }));
  const signature = sign("sha256", Buffer.from(`${HEADER}.${payload}`), { key, dsaEncoding: "ieee-p1363" }).toString("base64url");
  return `grant_type=client_credentials&client_assertion_type=${encodeURIComponent(CLIENT_ASSERTION_TYPE)}&client_assertion=${HEADER}.${payload}.${signature}`;
}

/** Writes `files` files of `perFile` assertion bodies each into `dir`; returns their paths. */
export function writeAssertionFiles(dir: string, key: KeyObject, clientId: string, audience: string, files: number, perFile: number): string[] {
  const batch = randomUUID();
  return Array.from({ length: files }, (_, file) => {
    const lines: string[] = [];
    for (let i = 0; i < perFile; i++) lines.push(assertionBody(key, clientId, audience, `${batch}-${file}-${i}`));
    const path = join(dir, `assertions-${file}.txt`);
    writeFileSync(path, `${lines.join("\n")}\n`);
    return path;
  });
}
