/**
 * core/oauth/client-assertion: the signature of an assertion, verified with node:crypto for every
 * accepted alg (what jose signs verifies; a changed, truncated, re-encoded or other key's signature
 * does not), on the event loop for cheap keys and off it for costly ones, registered keys parsed
 * once per stored set and never past its replacement, one that cannot be parsed verifying
 * nothing, and a header with `crit` refused.
 */
import { describe, expect, test } from "bun:test";
import { constants, createPrivateKey, sign as nodeSign } from "node:crypto";
import { base64url, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";
import { ASSERTION_ALGS, verifyClientAssertion, type AssertionAlg } from "../../../src/core/oauth/client-assertion.ts";
import { OAuthError } from "../../../src/core/oauth/errors.ts";
import type { ClientJwksRecord, ClientRecord, Store } from "../../../src/store/store.ts";

const NOW = Date.UTC(2026, 10, 28, 12);
const ENDPOINT = "https://tokens.example.test/oauth/token";
const CLIENT: ClientRecord = {
  id: "019b76da-a800-7e50-824c-20b312d17a69",
  projectId: "019b76da-a800-7e50-824c-20b312d17a00",
  providerId: "019b76da-a800-7e50-824c-20b312d17a01",
  name: "c",
  audience: "https://api.example.test",
  createdAt: NOW,
  updatedAt: NOW,
};

/** The two calls verifyClientAssertion makes of a store: the client's keys (the record `current()` gives) and the jti's single use. */
function storeOf(current: () => ClientJwksRecord | undefined): Store {
  const used = new Set<string>();
  return {
    getClientJwks: async () => current(),
    useAssertionJti: async (_projectId: string, clientId: string, jti: string) => {
      if (used.has(`${clientId}:${jti}`)) return false;
      used.add(`${clientId}:${jti}`);
      return true;
    },
  } as unknown as Store;
}

const record = (keys: JWK[]): ClientJwksRecord => ({ projectId: CLIENT.projectId, clientId: CLIENT.id, keys: keys as Record<string, string>[], updatedAt: NOW });

interface Pair {
  privateKey: CryptoKey;
  jwk: JWK;
}

/** A fresh key pair of `alg`, its public JWK named `kid`. */
async function pair(alg: AssertionAlg, kid: string): Promise<Pair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid } };
}

/** An assertion as a client sends it, signed with `key` (its kid in the header unless `header` says otherwise). */
const assertion = (alg: string, key: Pair, header: Record<string, unknown> = {}) =>
  new SignJWT({ jti: crypto.randomUUID() })
    .setProtectedHeader({ alg, kid: key.jwk.kid, ...header })
    .setIssuer(CLIENT.id)
    .setSubject(CLIENT.id)
    .setAudience(ENDPOINT)
    .setIssuedAt(NOW / 1000)
    .setExpirationTime(NOW / 1000 + 60)
    .sign(key.privateKey);

/** The description of the invalid_client `run` rejects with, or "accepted". */
async function outcome(run: Promise<void>): Promise<string> {
  try {
    await run;
    return "accepted";
  } catch (error) {
    if (!(error instanceof OAuthError)) throw error;
    expect(error.code).toBe("invalid_client");
    return error.message;
  }
}

const check = { audiences: [ENDPOINT], now: NOW };

/** The assertion with its signature segment replaced by `signature`. */
const resigned = (jwt: string, signature: Uint8Array) => `${jwt.slice(0, jwt.lastIndexOf("."))}.${base64url.encode(signature)}`;
const signatureOf = (jwt: string) => base64url.decode(jwt.slice(jwt.lastIndexOf(".") + 1));

describe("the signature of a client assertion", () => {
  for (const alg of ASSERTION_ALGS) {
    test(`${alg}: jose's signature verifies; a changed bit, a truncated signature or another key's does not`, async () => {
      const [key, other] = await Promise.all([pair(alg, "k1"), pair(alg, "k1")]);
      const store = storeOf(() => record([key.jwk]));
      const verifies = (jwt: string) => outcome(verifyClientAssertion(store, CLIENT, jwt, check));
      expect(await verifies(await assertion(alg, key))).toBe("accepted");

      const good = await assertion(alg, key);
      const flipped = signatureOf(good);
      flipped[flipped.length >> 1] = (flipped[flipped.length >> 1] as number) ^ 0x01;
      const refused = `client_assertion signature does not verify with the client's registered key for alg ${alg}.`;
      expect(await verifies(resigned(good, flipped))).toBe(refused);
      expect(await verifies(resigned(good, signatureOf(good).subarray(0, -1)))).toBe(refused);
      expect(await verifies(resigned(good, new Uint8Array(0)))).toBe(refused);
      expect(await verifies(await assertion(alg, other))).toBe(refused);
      // Unchanged, it still verifies (nothing above used up its jti).
      expect(await verifies(good)).toBe("accepted");
    });
  }

  test("an ECDSA signature in DER instead of R and S side by side is refused", async () => {
    const key = await pair("ES256", "k1");
    const good = await assertion("ES256", key);
    const der = nodeSign("sha256", Buffer.from(good.slice(0, good.lastIndexOf("."))), {
      key: createPrivateKey({ key: (await exportJWK(key.privateKey)) as never, format: "jwk" }),
      dsaEncoding: "der",
    });
    const verifies = (jwt: string) => outcome(verifyClientAssertion(storeOf(() => record([key.jwk])), CLIENT, jwt, check));
    expect(await verifies(resigned(good, der))).toBe("client_assertion signature does not verify with the client's registered key for alg ES256.");
  });

  test("RSA-PSS takes the salt as long as the digest (RFC 7518 §3.5), no other", async () => {
    const key = await pair("PS256", "k1");
    const signing = createPrivateKey({ key: (await exportJWK(key.privateKey)) as never, format: "jwk" });
    const store = storeOf(() => record([key.jwk]));
    const withSalt = async (saltLength: number) => {
      const jwt = await assertion("PS256", key);
      const data = Buffer.from(jwt.slice(0, jwt.lastIndexOf(".")));
      const signature = nodeSign("sha256", data, { key: signing, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength });
      return outcome(verifyClientAssertion(store, CLIENT, resigned(jwt, signature), check));
    };
    expect(await withSalt(32)).toBe("accepted");
    expect(await withSalt(0)).toBe("client_assertion signature does not verify with the client's registered key for alg PS256.");
    expect(await withSalt(64)).toBe("client_assertion signature does not verify with the client's registered key for alg PS256.");
  });

  test("a signature segment that is not base64url is not a JWT", async () => {
    const key = await pair("EdDSA", "k1");
    const good = await assertion("EdDSA", key);
    const verifies = (jwt: string) => outcome(verifyClientAssertion(storeOf(() => record([key.jwk])), CLIENT, jwt, check));
    expect(await verifies(`${good.slice(0, -2)}*${good.slice(-1)}`)).toStartWith("client_assertion is not a JWT");
    expect(await verifies(`${good}=`)).toStartWith("client_assertion is not a JWT");
  });

  test("an assertion of two or four segments is not a JWT, even handed over directly", async () => {
    const key = await pair("ES256", "k1");
    const good = await assertion("ES256", key);
    const verifies = (jwt: string) => outcome(verifyClientAssertion(storeOf(() => record([key.jwk])), CLIENT, jwt, check));
    expect(await verifies(good.slice(0, good.lastIndexOf(".")))).toStartWith("client_assertion is not a JWT");
    expect(await verifies(`${good}.${good.slice(good.lastIndexOf(".") + 1)}`)).toStartWith("client_assertion is not a JWT");
  });

  test("a replaced key set verifies with its new keys only, though the old ones were parsed before", async () => {
    const [first, second] = await Promise.all([pair("ES256", "k1"), pair("ES256", "k1")]);
    let current = record([first.jwk]);
    const store = storeOf(() => current);
    const verifies = async (key: Pair) => outcome(verifyClientAssertion(store, CLIENT, await assertion("ES256", key), check));
    expect(await verifies(first)).toBe("accepted");
    expect(await verifies(first)).toBe("accepted");
    current = record([second.jwk]);
    expect(await verifies(first)).toBe("client_assertion signature does not verify with the client's registered key for alg ES256.");
    expect(await verifies(second)).toBe("accepted");
  });

  test("P-256 verifies within the request's turn of the event loop; P-521 and RSA over 4096 bits off it, as costly", async () => {
    const [p256, p521, rsa] = await Promise.all([pair("ES256", "k1"), pair("ES512", "k1"), (async () => {
      const { privateKey, publicKey } = await generateKeyPair("RS256", { modulusLength: 4608, extractable: true });
      return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid: "k1" } };
    })()]);
    const turnsWhile = async (alg: string, key: Pair) => {
      const jwt = await assertion(alg, key);
      let turns = 0;
      let done = false;
      const spin = () => {
        turns++;
        if (!done) setImmediate(spin);
      };
      setImmediate(spin);
      const result = await outcome(verifyClientAssertion(storeOf(() => record([key.jwk])), CLIENT, jwt, check));
      done = true;
      return { result, turned: turns > 0 };
    };
    expect(await turnsWhile("ES256", p256)).toEqual({ result: "accepted", turned: false });
    expect(await turnsWhile("ES512", p521)).toEqual({ result: "accepted", turned: true });
    expect(await turnsWhile("RS256", rsa)).toEqual({ result: "accepted", turned: true });
  });

  test("a stored key that cannot be parsed verifies nothing, and the client's other keys are still tried", async () => {
    const good = await pair("ES256", "good");
    const broken = { ...good.jwk, kid: "broken", x: "AAAA" };
    const jwt = await assertion("ES256", good, { kid: undefined });
    expect(await outcome(verifyClientAssertion(storeOf(() => record([broken, good.jwk])), CLIENT, jwt, check))).toBe("accepted");
    expect(await outcome(verifyClientAssertion(storeOf(() => record([broken])), CLIENT, await assertion("ES256", good, { kid: "broken" }), check))).toBe(
      "client_assertion signature does not verify with the client's registered key for alg ES256.",
    );
  });

  test("a header listing crit extensions is refused, b64 included", async () => {
    const key = await pair("ES256", "k1");
    const store = storeOf(() => record([key.jwk]));
    const jwt = await assertion("ES256", key, { crit: ["b64"], b64: true });
    expect(await outcome(verifyClientAssertion(store, CLIENT, jwt, check))).toBe("client_assertion header lists crit extensions; none is accepted in an assertion: sign it without a crit header parameter.");
  });
});
