/**
 * Raw signing rate of the runtime, per algorithm: the fastest of WebCrypto (with many signatures
 * in flight) and node:crypto's synchronous sign, over a JWS-sized input. One process, so this is
 * the rate of one core; scripts/bench.ts runs one copy per core for the machine's rate.
 *
 *   bun scripts/bench/sign-rate.ts SECONDS   → prints JSON {RS256: {webcrypto, nodeSync}, ...}
 */
import { generateKeyPairSync, sign as nodeSign } from "node:crypto";
import { generateKeyPair } from "jose";

const seconds = Number(process.argv[2] ?? "2");
const input = new TextEncoder().encode("e".repeat(300));

async function rate(op: () => unknown | Promise<unknown>, inFlight: number): Promise<number> {
  const end = performance.now() + seconds * 1000;
  let count = 0;
  const lane = async () => {
    while (performance.now() < end) {
      await op();
      count++;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: inFlight }, lane));
  return count / ((performance.now() - start) / 1000);
}

const algs = {
  RS256: { web: { name: "RSASSA-PKCS1-v1_5" }, node: () => generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey, hash: "sha256" as string | null },
  ES256: { web: { name: "ECDSA", hash: "SHA-256" }, node: () => generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey, hash: "sha256" },
  EdDSA: { web: { name: "Ed25519" }, node: () => generateKeyPairSync("ed25519").privateKey, hash: null },
};

const result: Record<string, { webcrypto: number; nodeSync: number }> = {};
for (const [alg, spec] of Object.entries(algs)) {
  const { privateKey } = await generateKeyPair(alg, alg === "EdDSA" ? { crv: "Ed25519" } : {});
  const webcrypto = await rate(() => crypto.subtle.sign(spec.web as AlgorithmIdentifier, privateKey as CryptoKey, input), 64);
  const nodeKey = spec.node();
  const nodeSync = await rate(() => nodeSign(spec.hash, input, alg === "ES256" ? { key: nodeKey, dsaEncoding: "ieee-p1363" } : nodeKey), 1);
  result[alg] = { webcrypto: Math.round(webcrypto), nodeSync: Math.round(nodeSync) };
}
console.log(JSON.stringify(result));
