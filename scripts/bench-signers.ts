/**
 * Single-thread signing rate of every signer the runtime offers, per algorithm, over a JWS-sized
 * input with the service's own signer modules (src/keys/signers/): node:crypto `sign`
 * synchronous, node:crypto `sign` with a callback, WebCrypto `subtle.sign`, and the system's
 * libcrypto through bun:ffi (for ES256 and EdDSA with scripts/bench/libcrypto-ec.ts: the service
 * does not use it for them, as node:crypto signs them faster). Asynchronous signers run with
 * many signatures in flight, as a server would use them (×64 rows), and also one at a time.
 *
 *   bun scripts/bench-signers.ts [--seconds 2] [--json] [--signers node-sync,libcrypto]
 *
 * For each it prints signatures/s, the CPU the process used meanwhile (async signers may use
 * helper threads, so "×64" rows can exceed one core) and signatures per CPU second, which is
 * what counts once every core runs a worker. --json prints the same as one JSON object.
 */
import { parseArgs } from "node:util";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import { SIGNING_ALGS, type SigningAlg } from "../src/config/schema.ts";
import { nodeAsyncSigner, nodePrivateKey, nodeSyncSigner, webCryptoSigner } from "../src/keys/signers/builtin.ts";
import { libcryptoRsaSigner, loadLibcrypto } from "../src/keys/signers/libcrypto.ts";
import type { RawSigner } from "../src/keys/signers/signer.ts";
import { libcryptoEcSigner } from "./bench/libcrypto-ec.ts";

const { values } = parseArgs({
  options: { seconds: { type: "string", default: "2" }, json: { type: "boolean", default: false }, signers: { type: "string" } },
  strict: true,
});
const seconds = Number(values.seconds);
/** Only these signer kinds (comma-separated), e.g. the synchronous ones for an all-cores run. */
const only = values.signers === undefined ? undefined : new Set(values.signers.split(","));
// About the size of an access token's signing input (header and claims, base64url).
const input = new TextEncoder().encode("e".repeat(300));

/** One measurement: signatures per second and the CPU the process spent meanwhile (all threads). */
interface Rate {
  perSecond: number;
  /** CPU seconds per wall second: above 1 when the runtime signs on helper threads. */
  cpuCores: number;
  /** Signatures per CPU second: what one core yields once every core is busy. */
  perCpuSecond: number;
}

/** Measures `signer`; `inFlight` > 1 keeps that many asynchronous signatures pending. */
async function rate(signer: RawSigner, inFlight: number): Promise<Rate> {
  const end = performance.now() + seconds * 1000;
  let count = 0;
  const lane = async () => {
    while (performance.now() < end) {
      await signer.sign(input);
      count++;
    }
  };
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await Promise.all(Array.from({ length: inFlight }, lane));
  const wall = (performance.now() - start) / 1000;
  const cpuUsed = process.cpuUsage(cpuBefore);
  const cpu = (cpuUsed.user + cpuUsed.system) / 1e6;
  return { perSecond: Math.round(count / wall), cpuCores: Math.round((cpu / wall) * 100) / 100, perCpuSecond: Math.round(count / cpu) };
}

async function privateJwkFor(alg: SigningAlg): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, alg === "EdDSA" ? { crv: "Ed25519", extractable: true } : { extractable: true });
  return exportJWK(privateKey);
}

const libcrypto = await loadLibcrypto();
/** Per algorithm and signer ("node-async ×64" = 64 signatures in flight). */
const results: Record<string, Record<string, Rate>> = {};
for (const alg of SIGNING_ALGS) {
  const jwk = await privateJwkFor(alg);
  const key = nodePrivateKey(jwk);
  const signers: RawSigner[] = [nodeSyncSigner(alg, key), nodeAsyncSigner(alg, key), await webCryptoSigner(alg, jwk)];
  if (libcrypto.available) {
    if (alg === "RS256") signers.push(await libcryptoRsaSigner(new Uint8Array(key.export({ type: "pkcs8", format: "der" }))));
    else {
      const signer = await libcryptoEcSigner(alg, key);
      if (signer !== undefined) signers.push(signer);
    }
  }
  const row: Record<string, Rate> = {};
  for (const signer of signers) {
    if (only !== undefined && !only.has(signer.kind)) continue;
    const lanes = signer.kind === "node-sync" || signer.kind === "libcrypto" ? [1] : [1, 64];
    for (const inFlight of lanes) {
      await rate(signer, 1); // warm-up
      row[inFlight === 1 ? signer.kind : `${signer.kind} ×${inFlight}`] = await rate(signer, inFlight);
    }
  }
  results[alg] = row;
}

if (values.json) {
  console.log(JSON.stringify({ libcrypto, seconds, results }));
} else {
  console.log(`signers, ${seconds} s each; libcrypto: ${libcrypto.available ? libcrypto.version : `unavailable (${libcrypto.reason})`}`);
  console.log("alg    signer              sign/s  cpu cores  sign/cpu-s");
  for (const [alg, row] of Object.entries(results)) {
    for (const [name, r] of Object.entries(row)) {
      console.log(`${alg.padEnd(6)} ${name.padEnd(16)} ${String(r.perSecond).padStart(9)} ${r.cpuCores.toFixed(2).padStart(10)} ${String(r.perCpuSecond).padStart(11)}`);
    }
  }
}
