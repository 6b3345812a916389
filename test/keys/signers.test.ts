/**
 * The signers of keys/signers/: RS256 through the system's libcrypto signs byte-identically to
 * the runtime's own signer (PKCS#1 v1.5 is deterministic) and its tokens verify with jose; every
 * built-in signer makes valid signatures; and whenever libcrypto cannot be used (missing, no JIT
 * for bun:ffi, another runtime, or TOKENMINT_SIGNER=builtin) the service still signs, with the
 * built-in signer, and says so in its start-up log.
 * Needs the system's OpenSSL 3 (`libcrypto.so.3`, Debian's libssl3).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createPublicKey, generateKeyPairSync, verify, type KeyObject } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify, type JWK } from "jose";
import { SIGNING_ALGS, type SigningAlg } from "../../src/config/schema.ts";
import { generateSigningKey } from "../../src/keys/generate.ts";
import { KeyRing } from "../../src/keys/key-ring.ts";
import { initialKeySet } from "../../src/keys/lifecycle.ts";
import { importMasterKey } from "../../src/keys/sealing.ts";
import { nodeAsyncSigner, nodePrivateKey, nodeSyncSigner, webCryptoSigner } from "../../src/keys/signers/builtin.ts";
import { SignerFactory } from "../../src/keys/signers/factory.ts";
import { libcryptoRsaSigner, loadLibcrypto } from "../../src/keys/signers/libcrypto.ts";
import { silentLogger } from "../../src/logging/logger.ts";
import type { SigningKeyRecord } from "../../src/store/store.ts";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";

const encoder = new TextEncoder();
const rsaJwk = (bits: number): JWK => generateKeyPairSync("rsa", { modulusLength: bits }).privateKey.export({ format: "jwk" }) as JWK;
const pkcs8 = (jwk: JWK) => new Uint8Array(nodePrivateKey(jwk).export({ type: "pkcs8", format: "der" }));
/** Inputs of different shapes: empty-ish, token-sized, not ASCII, long. */
const INPUTS = ["a", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjbGllbnQifQ", "ünïcødé ✓ 🔑", "x".repeat(10_000)].map((s) => encoder.encode(s));

const opened: TestApp[] = [];
afterAll(async () => {
  for (const t of opened.splice(0)) await t.close();
});

describe("libcrypto RS256", () => {
  test("is available here (Linux with OpenSSL 3) and names its version", async () => {
    const status = await loadLibcrypto();
    expect(status).toEqual({ available: true, version: expect.stringMatching(/^OpenSSL 3\./) });
  });

  test("signs byte-identically to every built-in signer, for several keys, sizes and inputs", async () => {
    for (const bits of [2048, 2048, 3072]) {
      const jwk = rsaJwk(bits);
      const key = nodePrivateKey(jwk);
      const fast = await libcryptoRsaSigner(pkcs8(jwk));
      const builtins = [nodeSyncSigner("RS256", key), nodeAsyncSigner("RS256", key), await webCryptoSigner("RS256", jwk)];
      for (const input of INPUTS) {
        const signature = await fast.sign(input);
        expect(signature.byteLength).toBe(bits / 8);
        for (const builtin of builtins) expect(Buffer.from(await builtin.sign(input)).equals(signature)).toBe(true);
        expect(verify("sha256", input, createPublicKey(key), signature)).toBe(true);
      }
      fast.dispose();
    }
  });

  test("a ring built with the default factory signs RS256 with libcrypto, and jose verifies the token", async () => {
    const t = await buildTestApp({ alg: "RS256" });
    opened.push(t);
    const ring = t.ctx.keys.ring(t.ctx.projectId);
    expect(ring.signerKind).toBe("libcrypto");
    const token = await ring.sign("at+jwt", { sub: "c1", aud: "https://api.example.test", iat: 1, exp: 4_000_000_000 });
    const jwk = JSON.parse(ring.jwksBody).keys[0] as JWK;
    const { payload } = await jwtVerify(token, jwk, { audience: "https://api.example.test", typ: "at+jwt" });
    expect(payload.sub).toBe("c1");
    expect(decodeProtectedHeader(token)).toEqual({ alg: "RS256", kid: ring.kid, typ: "at+jwt" });
  });

  test("refuses a key that is not RSA, wipes the DER it was given, and refuses to sign after dispose", async () => {
    const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "der" });
    await expect(libcryptoRsaSigner(new Uint8Array(ec))).rejects.toThrow("not an RSA key");
    const der = pkcs8(rsaJwk(2048));
    const signer = await libcryptoRsaSigner(der);
    expect(der.every((byte) => byte === 0)).toBe(true);
    signer.dispose();
    expect(() => signer.sign(INPUTS[0] as Uint8Array)).toThrow("after dispose");
  });
});

describe("deferred libcrypto (a starting server)", () => {
  test("RS256 signs with the built-in signer until handOver, then with libcrypto: the same bytes throughout", async () => {
    const factory = new SignerFactory({ mode: "auto", deferLibcrypto: true });
    const jwk = rsaJwk(2048);
    const reference = nodeSyncSigner("RS256", nodePrivateKey(jwk));
    const signer = await factory.create("RS256", jwk);
    expect(signer.kind).toBe("node-sync");
    const before = await Promise.all(INPUTS.map((input) => signer.sign(input)));
    await factory.handOver();
    expect(signer.kind).toBe("libcrypto");
    for (const [i, input] of INPUTS.entries()) {
      const expected = Buffer.from(await reference.sign(input));
      expect(Buffer.from(before[i] as Uint8Array).equals(expected)).toBe(true);
      expect(Buffer.from(await signer.sign(input)).equals(expected)).toBe(true);
    }
  });

  test("a signer made after handOver uses libcrypto at once; ES256 and EdDSA keep node:crypto", async () => {
    const factory = new SignerFactory({ mode: "auto", deferLibcrypto: true });
    const early = await factory.create("ES256", (await exportJWK((await generateKeyPair("ES256", { extractable: true })).privateKey)) as JWK);
    await factory.handOver();
    expect(early.kind).toBe("node-sync");
    expect((await factory.create("RS256", rsaJwk(2048))).kind).toBe("libcrypto");
    const ed = await exportJWK((await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true })).privateKey);
    expect((await factory.create("EdDSA", ed as JWK)).kind).toBe("node-sync");
  });

  test("handOver lets the process answer requests between keys (a server with many RS256 projects)", async () => {
    const factory = new SignerFactory({ mode: "auto", deferLibcrypto: true });
    const jwk = rsaJwk(2048);
    const signers = await Promise.all(Array.from({ length: 40 }, () => factory.create("RS256", jwk)));
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
    try {
      // Asked before the hand-over starts: answered only when the process gets to its sockets.
      const asked = fetch(server.url).then(async (res) => ({ text: await res.text(), left: signers.filter((s) => s.kind !== "libcrypto").length }));
      await factory.handOver();
      const answer = await asked;
      expect(answer.text).toBe("ok");
      // Answered while keys were still waiting for their hand-over.
      expect(answer.left).toBeGreaterThan(0);
      expect(signers.every((s) => s.kind === "libcrypto")).toBe(true);
    } finally {
      server.stop(true);
    }
  });

  test("without a usable libcrypto, handOver keeps the built-in signer, and signing goes on", async () => {
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (msg: string) => void warnings.push(msg) };
    const factory = new SignerFactory({ mode: "auto", deferLibcrypto: true, libcryptoName: "libcrypto-missing.so.3", logger });
    const jwk = rsaJwk(2048);
    const signer = await factory.create("RS256", jwk);
    await factory.handOver();
    expect(signer.kind).toBe("node-sync");
    const signature = await signer.sign(INPUTS[1] as Uint8Array);
    expect(verify("sha256", INPUTS[1] as Uint8Array, createPublicKey(nodePrivateKey(jwk)), signature)).toBe(true);
    expect(warnings).toEqual([]);
  });

  test("a key ring of a deferring factory reports its signer as it changes and its tokens verify before and after", async () => {
    const masterKey = await importMasterKey(crypto.getRandomValues(new Uint8Array(32)));
    const keys = await Promise.all((["current", "next"] as const).map((state) => generateSigningKey("p1", "RS256", masterKey, 1_000, state)));
    const factory = new SignerFactory({ mode: "auto", deferLibcrypto: true });
    const ring = await KeyRing.build(initialKeySet("p1", keys[0] as SigningKeyRecord, keys[1] as SigningKeyRecord, 1_000), masterKey, factory);
    const jwk = JSON.parse(ring.jwksBody).keys[0] as JWK;
    const claims = { sub: "c1", aud: "https://api.example.test", iat: 1, exp: 4_000_000_000 };
    expect(ring.signerKind).toBe("node-sync");
    const first = await ring.sign("at+jwt", claims);
    await factory.handOver();
    expect(ring.signerKind).toBe("libcrypto");
    expect(await ring.sign("at+jwt", claims)).toBe(first);
    expect((await jwtVerify(first, jwk, { audience: "https://api.example.test" })).payload.sub).toBe("c1");
  });
});

describe("built-in signers", () => {
  const verifyJws = (alg: SigningAlg, key: KeyObject, input: Uint8Array, signature: Uint8Array) =>
    verify(alg === "EdDSA" ? null : "sha256", input, alg === "ES256" ? { key: createPublicKey(key), dsaEncoding: "ieee-p1363" } : createPublicKey(key), signature);

  for (const alg of SIGNING_ALGS) {
    test(`${alg}: node:crypto sync and async and WebCrypto all make valid JWS signatures`, async () => {
      const { privateKey } = await generateKeyPair(alg, alg === "EdDSA" ? { crv: "Ed25519", extractable: true } : { extractable: true });
      const jwk = await exportJWK(privateKey);
      const key = nodePrivateKey(jwk);
      for (const signer of [nodeSyncSigner(alg, key), nodeAsyncSigner(alg, key), await webCryptoSigner(alg, jwk)]) {
        const signature = await signer.sign(INPUTS[1] as Uint8Array);
        // ES256 in JWS is r||s (64 bytes), not DER.
        if (alg !== "RS256") expect(signature.byteLength).toBe(64);
        expect(verifyJws(alg, key, INPUTS[1] as Uint8Array, signature)).toBe(true);
      }
    });
  }
});

describe("fallback to the built-in signer", () => {
  test("a missing libcrypto: the plan says why, RS256 signs with node:crypto, tokens still verify", async () => {
    const factory = new SignerFactory({ mode: "auto", libcryptoName: "libcrypto-missing.so.3" });
    const plan = await factory.plan();
    expect(plan.signers).toEqual({ RS256: "node-sync", ES256: "node-sync", EdDSA: "node-sync" });
    expect(plan.libcryptoUnavailable).toContain("libcrypto-missing.so.3");
    const jwk = rsaJwk(2048);
    const signer = await factory.create("RS256", jwk);
    expect(signer.kind).toBe("node-sync");
    expect(verify("sha256", INPUTS[1] as Uint8Array, createPublicKey(nodePrivateKey(jwk)), await signer.sign(INPUTS[1] as Uint8Array))).toBe(true);
  });

  test("TOKENMINT_SIGNER=builtin: the service signs RS256 with node:crypto and logs so at start-up", async () => {
    const logLines: string[] = [];
    const t = await buildTestApp({ alg: "RS256", env: { TOKENMINT_SIGNER: "builtin" }, logLines });
    opened.push(t);
    expect(t.ctx.keys.ring(t.ctx.projectId).signerKind).toBe("node-sync");
    const entry = logLines.map((line) => JSON.parse(line)).find((e) => e.msg === "signers");
    expect(entry).toMatchObject({ level: "info", RS256: "node-sync", ES256: "node-sync", EdDSA: "node-sync" });
    const { providerId, clientId } = await createProviderAndClient(t);
    const issued = await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, {});
    expect(issued.status).toBe(201);
    const jwk = JSON.parse(t.ctx.keys.ring(t.ctx.projectId).jwksBody).keys[0] as JWK;
    await jwtVerify(((await issued.json()) as { accessToken: string }).accessToken, jwk, { currentDate: new Date(t.clock.now()) });
  });

  test("the default start-up log names libcrypto and OpenSSL's version for RS256", async () => {
    const logLines: string[] = [];
    const t = await buildTestApp({ alg: "EdDSA", logLines });
    opened.push(t);
    const entry = logLines.map((line) => JSON.parse(line)).find((e) => e.msg === "signers");
    expect(entry).toMatchObject({ RS256: "libcrypto", ES256: "node-sync", EdDSA: "node-sync", libcrypto: expect.stringMatching(/^OpenSSL 3\./) });
  });

  test("without the JIT (as under MemoryDenyWriteExecute) bun:ffi is refused; the service starts and signs anyway", async () => {
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "signer-child.ts")], {
      env: { ...process.env, BUN_JSC_useJIT: "0" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    expect({ code, err: code === 0 ? "" : err }).toEqual({ code: 0, err: "" });
    const result = JSON.parse(out.trim().split("\n").at(-1) as string);
    expect(result).toMatchObject({ signer: "node-sync", verified: true, signersLog: { RS256: "node-sync", libcryptoUnavailable: expect.stringContaining("JIT") } });
  }, 60_000);

  test.skipIf(Bun.which("node") === null)("under Node (no bun:ffi) the factory plans and signs with node:crypto", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tokenmint-node-"));
    try {
      const built = await Bun.build({ entrypoints: [join(import.meta.dir, "node-runtime-child.ts")], target: "node", outdir: dir, naming: "child.mjs" });
      expect(built.success).toBe(true);
      const child = Bun.spawnSync(["node", join(dir, "child.mjs")], { stdout: "pipe", stderr: "pipe" });
      expect({ code: child.exitCode, err: child.stderr.toString() }).toEqual({ code: 0, err: "" });
      const result = JSON.parse(child.stdout.toString().trim());
      expect(result).toEqual({
        plan: { signers: { RS256: "node-sync", ES256: "node-sync", EdDSA: "node-sync" }, libcryptoUnavailable: "not running on Bun" },
        kind: "node-sync",
        verified: true,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
