/** CONTRACT §2 keys rows and §4 key lifecycle: list, rotate, revoke. */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { buildTestApp, createProviderAndClient, T0, type TestApp } from "../helpers/app.ts";
import { expectError, json } from "./support.ts";

interface KeyInfo {
  kid: string;
  alg: string;
  state: "next" | "current" | "retired";
  createdAt: string;
  activatesAt?: string;
  retiredAt?: string;
  removedFromJwksAt?: string;
}

const ALLOWED = ["kid", "alg", "state", "createdAt", "activatesAt", "retiredAt", "removedFromJwksAt"];
const iso = (ms: number) => new Date(ms).toISOString();
const DAY_S = 86400;
/** Retirement + 48 h + the 5 min clock-skew margin. */
const RETIRED_FOR_S = 172800 + 300;

describe("signing keys API", () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await buildTestApp();
  });
  afterEach(() => t.close());

  const list = async () => {
    const res = await t.api("GET", "/v1/keys");
    expect(res.status).toBe(200);
    return (await json<{ items: KeyInfo[] }>(res)).items;
  };
  const jwksKids = async () => (await json<{ keys: { kid: string }[] }>(await t.request("GET", "/.well-known/jwks"))).keys.map((k) => k.kid);
  const byState = (items: KeyInfo[], state: KeyInfo["state"]) => items.filter((k) => k.state === state);

  test("GET /v1/keys lists current and next with public metadata only", async () => {
    const res = await t.api("GET", "/v1/keys");
    expect(res.status).toBe(200);
    const body = await json<{ items: KeyInfo[] }>(res);
    expect(Object.keys(body)).toEqual(["items"]);
    const [current, next] = body.items;
    expect(body.items.length).toBe(2);
    expect(current).toEqual({ kid: expect.any(String), alg: "ES256", state: "current", createdAt: iso(T0), activatesAt: iso(T0) });
    expect(next).toEqual({ kid: expect.any(String), alg: "ES256", state: "next", createdAt: iso(T0), activatesAt: iso(T0 + DAY_S * 1000) });
    for (const item of body.items) expect(ALLOWED).toEqual(expect.arrayContaining(Object.keys(item)));
    expect((await jwksKids()).sort()).toEqual([current?.kid, next?.kid].sort());
    const text = JSON.stringify(body);
    for (const leak of ['"d":', '"x":', '"n":', "publicJwk", "sealedPrivateJwk", "PRIVATE"]) expect(text).not.toContain(leak);
  });

  test("POST /v1/keys/rotate right after start is 409: the next key is not yet published long enough", async () => {
    const before = await list();
    await expectError(await t.api("POST", "/v1/keys/rotate"), 409, "conflict");
    expect(await list()).toEqual(before);
  });

  test("after the JWKS max-age, rotate answers 200: next signs, the old current is retired until its tokens expired", async () => {
    const [oldCurrent, oldNext] = [byState(await list(), "current")[0], byState(await list(), "next")[0]];
    const { providerId, clientId } = await createProviderAndClient(t);
    const tokenPath = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
    const oldToken = (await json<{ accessToken: string }>(await t.api("POST", tokenPath))).accessToken;

    t.clock.advance(t.ctx.keys.jwksMaxAge(t.ctx.projectId) + 1);
    const now = t.clock.now();
    const res = await t.api("POST", "/v1/keys/rotate");
    expect(res.status).toBe(200);
    const items = (await json<{ items: KeyInfo[] }>(res)).items;
    expect(items).toEqual(await list());
    expect(byState(items, "current")).toEqual([{ ...(oldNext as KeyInfo), state: "current", activatesAt: iso(now) }]);
    expect(byState(items, "retired")).toEqual([
      { ...(oldCurrent as KeyInfo), state: "retired", retiredAt: iso(now), removedFromJwksAt: iso(now + RETIRED_FOR_S * 1000) },
    ]);
    const next = byState(items, "next");
    expect(next.length).toBe(1);
    expect(next[0]?.kid).not.toBeOneOf([oldCurrent?.kid, oldNext?.kid]);
    expect((await jwksKids()).sort()).toEqual(items.map((k) => k.kid).sort());

    const newToken = (await json<{ accessToken: string }>(await t.api("POST", tokenPath))).accessToken;
    expect(decodeProtectedHeader(newToken).kid).toBe(oldNext?.kid);
    const jwks = createLocalJWKSet((await (await t.request("GET", "/.well-known/jwks")).json()) as JSONWebKeySet);
    for (const token of [oldToken, newToken]) await jwtVerify(token, jwks, { currentDate: new Date(t.clock.now()) });
  });

  test("revoking a key answers 200 with the key list and drops the kid from the JWKS at once", async () => {
    const current = byState(await list(), "current")[0] as KeyInfo;
    const { providerId, clientId } = await createProviderAndClient(t);
    const tokenPath = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
    const oldToken = (await json<{ accessToken: string }>(await t.api("POST", tokenPath))).accessToken;

    const res = await t.api("POST", `/v1/keys/${current.kid}/revoke`);
    expect(res.status).toBe(200);
    const items = (await json<{ items: KeyInfo[] }>(res)).items;
    expect(items.map((k) => k.kid)).not.toContain(current.kid);
    expect(byState(items, "current").length).toBe(1);
    expect(byState(items, "next").length).toBe(1);
    expect(await jwksKids()).not.toContain(current.kid);

    const newToken = (await json<{ accessToken: string }>(await t.api("POST", tokenPath))).accessToken;
    expect(decodeProtectedHeader(newToken).kid).not.toBe(current.kid);
    const jwks = createLocalJWKSet((await (await t.request("GET", "/.well-known/jwks")).json()) as JSONWebKeySet);
    await jwtVerify(newToken, jwks, { currentDate: new Date(t.clock.now()) });
    await expect(jwtVerify(oldToken, jwks, { currentDate: new Date(t.clock.now()) })).rejects.toThrow();
    // Revoked again: not found, and the message says a revoked key is not kept.
    await expectError(await t.api("POST", `/v1/keys/${current.kid}/revoke`), 404, "not_found", "revoked");
  });

  test("revoking the next key replaces it with a fresh next key", async () => {
    const next = byState(await list(), "next")[0] as KeyInfo;
    expect((await t.api("POST", `/v1/keys/${next.kid}/revoke`)).status).toBe(200);
    const after = await list();
    expect(byState(after, "next").length).toBe(1);
    expect(byState(after, "next")[0]?.kid).not.toBe(next.kid);
    expect(await jwksKids()).not.toContain(next.kid);
  });

  test("revoking an unknown kid is 404, a malformed kid is 400", async () => {
    await expectError(await t.api("POST", "/v1/keys/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/revoke"), 404, "not_found");
    for (const bad of ["!!", "a.b", "%20", "x".repeat(129)]) {
      await expectError(await t.api("POST", `/v1/keys/${bad}/revoke`), 400, "invalid_request", "kid");
    }
    expect((await list()).length).toBe(2);
  });
});
