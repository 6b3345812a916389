/**
 * A client's public keys (private_key_jwt) through the management API: replaced as a set, read
 * back with public members only and a kid on every key, refused with a message naming the
 * problem, gone with their client, scoped by provider, and behind the API key.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { calculateJwkThumbprint } from "jose";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { assertionRequest, clientKey, registerKeys, signAssertion, type ClientKey } from "../oauth/assertions.ts";
import { expectInvalidClient } from "../oauth/support.ts";
import { bodyOf, expectError, json, UNKNOWN_ID } from "./support.ts";

describe("client public keys", () => {
  let t: TestApp;
  let es: ClientKey;
  let ed: ClientKey;
  beforeAll(async () => {
    t = await buildTestApp();
    es = await clientKey("ES256");
    ed = await clientKey("EdDSA", "ed-1");
  });
  afterAll(() => t.close());

  const jwksPath = (providerId: string, clientId: string) => `/v1/providers/${providerId}/clients/${clientId}/jwks`;

  test("PUT answers 200 with the stored set; GET answers the same; a missing kid is the RFC 7638 thumbprint", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const stored = await registerKeys(t, providerId, clientId, [es.publicJwk, { ...ed.publicJwk, use: "sig", key_ops: ["verify"], ext: true }]);
    expect(stored).toEqual({
      keys: [
        { kty: "EC", kid: await calculateJwkThumbprint(es.publicJwk, "sha256"), crv: "P-256", x: es.publicJwk.x as string, y: es.publicJwk.y as string },
        { kty: "OKP", kid: "ed-1", use: "sig", crv: "Ed25519", x: ed.publicJwk.x as string },
      ],
    });
    const res = await t.api("GET", jwksPath(providerId, clientId));
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual(stored);
  });

  test("PUT replaces the whole set: a key left out stops authenticating at once", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    await registerKeys(t, providerId, clientId, [es.publicJwk, ed.publicJwk]);
    expect((await assertionRequest(t, await signAssertion(t, es, clientId))).status).toBe(200);
    const after = await registerKeys(t, providerId, clientId, [ed.publicJwk]);
    expect(after.keys.map((k) => k.kid)).toEqual(["ed-1"]);
    await expectInvalidClient(await assertionRequest(t, await signAssertion(t, es, clientId)), "No registered key");
    expect((await assertionRequest(t, await signAssertion(t, ed, clientId))).status).toBe(200);
  });

  test("GET and DELETE are 404 while the client has no keys; DELETE is 204 and ends private_key_jwt for the client", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    await expectError(await t.api("GET", jwksPath(providerId, clientId)), 404, "not_found", "has no public keys");
    await expectError(await t.api("DELETE", jwksPath(providerId, clientId)), 404, "not_found", "has no public keys");
    await registerKeys(t, providerId, clientId, [es.publicJwk]);
    const res = await t.api("DELETE", jwksPath(providerId, clientId));
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    await expectError(await t.api("GET", jwksPath(providerId, clientId)), 404, "not_found");
    await expectInvalidClient(await assertionRequest(t, await signAssertion(t, es, clientId)), "without registered public keys");
  });

  test("a refused set answers 400 naming the key and the problem, and changes nothing", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const stored = await registerKeys(t, providerId, clientId, [es.publicJwk]);
    const put = (body: unknown) => t.api("PUT", jwksPath(providerId, clientId), body);
    await expectError(await put({ keys: [es.publicJwk, { ...ed.publicJwk, d: "AAAA" }] }), 400, "invalid_request", "keys[1]: private key member 'd'");
    await expectError(await put({ keys: [{ kty: "oct", k: "c2VjcmV0" }] }), 400, "invalid_request", "symmetric keys");
    // Members in the base64url alphabet but of a length no bytes encode (4n + 1 characters).
    await expectError(await put({ keys: [{ kty: "RSA", n: "EdDSA", e: "AQAB" }] }), 400, "invalid_request", "keys[0]: 'n' is required for kty 'RSA' (a base64url string)");
    await expectError(await put({ keys: [{ kty: "RSA", n: `${"A".repeat(341)}B`, e: "AQABC" }] }), 400, "invalid_request", "keys[0]: 'e'");
    await expectError(await put({ keys: [{ ...es.publicJwk, x: `${es.publicJwk.x}A` }] }), 400, "invalid_request", "keys[0]");
    await expectError(await put({ keys: [{ ...es.publicJwk, use: "enc" }] }), 400, "invalid_request", "use must be 'sig'");
    await expectError(await put({ keys: [{ ...es.publicJwk, kid: "a" }, { ...ed.publicJwk, kid: "a" }] }), 400, "invalid_request", "kids must be unique");
    await expectError(await put({ keys: [] }), 400, "invalid_request", "keys");
    await expectError(await put({ keys: Array.from({ length: 6 }, (_, i) => ({ ...es.publicJwk, kid: `k${i}` })) }), 400, "invalid_request", "keys");
    await expectError(await put({ keys: ["x"] }), 400, "invalid_request", "keys");
    await expectError(await put({}), 400, "invalid_request", "keys");
    await expectError(await put({ keys: [es.publicJwk], extra: 1 }), 400, "invalid_request", "extra");
    await expectError(await put({ ...es.publicJwk }), 400, "invalid_request");
    await expectError(await t.api("PUT", jwksPath(providerId, clientId), "keys=1", { "content-type": "application/x-www-form-urlencoded" }), 415, "unsupported_media_type");
    expect(await bodyOf(await t.api("GET", jwksPath(providerId, clientId)))).toEqual(stored);
  });

  test("deleting the client deletes its keys; a client created again starts without keys", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    await registerKeys(t, providerId, clientId, [es.publicJwk]);
    const assertion = await signAssertion(t, es, clientId);
    expect((await t.api("DELETE", `/v1/providers/${providerId}/clients/${clientId}`)).status).toBe(204);
    expect(await t.ctx.store.getClientJwks(t.ctx.projectId, clientId)).toBeUndefined();
    await expectError(await t.api("GET", jwksPath(providerId, clientId)), 404, "not_found");
    await expectInvalidClient(await assertionRequest(t, assertion), "unknown client");
  });

  test("wrong provider or client → 404 and nothing stored; malformed ids → 400", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const other = await createProviderAndClient(t);
    for (const path of [jwksPath(UNKNOWN_ID, clientId), jwksPath(providerId, UNKNOWN_ID), jwksPath(other.providerId, clientId)]) {
      await expectError(await t.api("PUT", path, { keys: [es.publicJwk] }), 404, "not_found");
      await expectError(await t.api("GET", path), 404, "not_found");
      await expectError(await t.api("DELETE", path), 404, "not_found");
    }
    expect(await t.ctx.store.getClientJwks(t.ctx.projectId, clientId)).toBeUndefined();
    await expectError(await t.api("GET", jwksPath(providerId, "nope")), 400, "invalid_request", "clientId");
    await expectError(await t.api("PUT", jwksPath("nope", clientId), { keys: [es.publicJwk] }), 400, "invalid_request", "providerId");
  });

  test("every key route needs the API key; other methods are 405 with Allow", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    await registerKeys(t, providerId, clientId, [es.publicJwk]);
    for (const method of ["PUT", "GET", "DELETE"]) {
      const res = await t.request(method, jwksPath(providerId, clientId), method === "PUT" ? { keys: [ed.publicJwk] } : undefined);
      expect(res.headers.get("www-authenticate")).toStartWith("Bearer");
      await expectError(res, 401, "unauthorized");
    }
    const res = await t.api("POST", jwksPath(providerId, clientId), { keys: [ed.publicJwk] });
    expect(res.headers.get("allow")).toBe("PUT, GET, DELETE, HEAD");
    await expectError(res, 405, "method_not_allowed");
    expect((await json<{ keys: unknown[] }>(await t.api("GET", jwksPath(providerId, clientId)))).keys).toHaveLength(1);
  });
});
