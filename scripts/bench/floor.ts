/**
 * The HTTP floor: a trivial Elysia server that does what the token endpoint does minus the
 * service's own work. It parses the same JSON body and answers a body of similar size, so
 * tokens/s ÷ floor/s shows what issuing costs beyond HTTP itself. It runs as many processes as
 * the service runs workers, all on one port (`reusePort`), so both have the machine alike.
 *
 *   bun scripts/bench/floor.ts PORT [PROCESSES] [JWKS_BYTES[,DISCOVERY_BYTES]] [ALG]
 *
 * The sizes are those of its GET answers, `/jwks` and `/discovery` (the bench passes the lengths
 * of the JWKS and the discovery document it measured, so each is compared with a bare answer of
 * its own size).
 *
 * With ALG (RS256, ES256 or EdDSA) it is the signing floor: the POST answer's `accessToken` is a
 * real JWS of the same claims a token carries, signed inline with the signer the service picks
 * for ALG (src/keys/signers/factory.ts: libcrypto for RS256 where it loads). It is the least any
 * issuer on this runtime does per token, HTTP and one signature, measured rather than computed:
 * a signature made between requests costs more than one of a tight loop, whose tables and code
 * stay in the CPU's caches.
 */
import { Elysia } from "elysia";
import { base64url, exportJWK, generateKeyPair, type JWK } from "jose";
import { SIGNING_ALGS, type SigningAlg } from "../../src/config/schema.ts";
import { publicJwkOf } from "../../src/keys/generate.ts";
import { SignerFactory } from "../../src/keys/signers/factory.ts";

const port = Number(process.argv[2]);
const processes = Number(process.argv[3] ?? "1");
const getBytesArg = process.argv[4] ?? "700";
const [jwksBytes, discoveryBytes = jwksBytes] = getBytesArg.split(",").map(Number) as [number, number?];
const alg = process.argv[5] as SigningAlg | undefined;
if (alg !== undefined && !SIGNING_ALGS.includes(alg)) throw new Error(`unknown algorithm ${alg}`);

/** The signing floor's key: made by the first process and handed to the others, so every token verifies against GET /key. */
const KEY_ENV = "FLOOR_PRIVATE_JWK";
let privateJwk: JWK | undefined;
if (alg !== undefined) {
  const inherited = process.env[KEY_ENV];
  if (inherited !== undefined) privateJwk = JSON.parse(inherited) as JWK;
  else {
    const { privateKey } = await generateKeyPair(alg, alg === "EdDSA" ? { crv: "Ed25519", extractable: true } : { extractable: true });
    privateJwk = await exportJWK(privateKey);
  }
}

// The other processes, stopped with this one.
const others = Array.from({ length: Math.max(0, processes - 1) }, () =>
  Bun.spawn([process.execPath, import.meta.path, String(port), "1", getBytesArg, ...(alg === undefined ? [] : [alg])], {
    stdout: "ignore",
    stderr: "inherit",
    env: { ...process.env, ...(privateJwk === undefined ? {} : { [KEY_ENV]: JSON.stringify(privateJwk) }) },
  }),
);
process.on("SIGTERM", () => {
  for (const other of others) other.kill("SIGTERM");
  process.exit(0);
});

const encoder = new TextEncoder();
// About the size of a token answer (RS256 JWT plus expiresAt and type).
const filler = "x".repeat(560);
/** The answer's `accessToken`: the filler, or a real JWS for the signing floor. */
let accessToken: () => string = () => filler;
/** The signing floor's public key, served at GET /key so the bench can verify a token first. */
let publicJwk: Record<string, string> | undefined;
if (alg !== undefined && privateJwk !== undefined) {
  const signer = await new SignerFactory({ mode: "auto" }).create(alg, privateJwk);
  const header = base64url.encode(JSON.stringify({ alg, kid: "floor", typ: "at+jwt" }));
  const iss = `http://127.0.0.1:${port}`;
  accessToken = () => {
    const iat = Math.floor(Date.now() / 1000);
    const claims = { iss, sub: "floor", client_id: "floor", aud: "https://bench.example", iat, exp: iat + 600, jti: crypto.randomUUID() };
    const input = `${header}.${base64url.encode(JSON.stringify(claims))}`;
    const signature = signer.sign(encoder.encode(input));
    if (signature instanceof Promise) throw new Error("the signing floor signs synchronously");
    return `${input}.${base64url.encode(signature)}`;
  };
  publicJwk = publicJwkOf(privateJwk, "floor", alg);
}
// The key set's size less its fixed members; the discovery document's less its issuer member.
const modulus = "x".repeat(Math.max(0, jwksBytes - 82));
const metadata = "x".repeat(Math.max(0, discoveryBytes - 48));
const app = new Elysia()
  .post("/tokens", ({ body, set }) => {
    set.status = 201;
    set.headers["cache-control"] = "no-store";
    return { accessToken: accessToken(), expiresAt: new Date().toISOString(), type: "Bearer", echo: (body as { expiresIn?: number }).expiresIn };
  })
  .get("/key", ({ set }) => publicJwk ?? ((set.status = 404), {}))
  .get("/jwks", ({ set }) => {
    set.headers["cache-control"] = "public, max-age=300";
    return { keys: [{ kty: "RSA", n: modulus, e: "AQAB", kid: "floor", alg: "RS256", use: "sig" }] };
  })
  .get("/discovery", ({ set }) => {
    set.headers["cache-control"] = "public, max-age=300";
    return { issuer: "http://127.0.0.1:8080", metadata };
  });
Bun.serve({ hostname: "127.0.0.1", port, reusePort: true, fetch: (request) => app.handle(request) });
