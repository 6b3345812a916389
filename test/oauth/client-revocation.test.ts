/**
 * POST /v1/providers/{providerId}/clients/{clientId}/revoke-tokens: every token the client was
 * issued before the call becomes inactive (tokens of the same second too, since `iat` has second
 * precision), later ones are active; the client view shows `tokensRevokedBefore`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { buildTestApp, T0, type TestApp } from "../helpers/app.ts";
import { bodyOf, expectError, ISO_RE, json, UNKNOWN_ID } from "../http/support.ts";
import { createTestClient, introspect, isActive, issueToken, type TestClient } from "./support.ts";

describe("client-wide token revocation", () => {
  let t: TestApp;
  let owner: TestClient;
  let bystander: TestClient;
  const path = (c: TestClient) => `/v1/providers/${c.providerId}/clients/${c.clientId}`;
  beforeAll(async () => {
    t = await buildTestApp();
    owner = await createTestClient(t);
    bystander = await createTestClient(t, owner.providerId);
  });
  afterAll(() => t.close());

  test("a client never revoked shows no tokensRevokedBefore", async () => {
    const client = await json<Record<string, unknown>>(await t.api("GET", path(bystander)));
    expect(Object.keys(client).sort()).toEqual(["audience", "createdAt", "id", "name", "providerId"]);
  });

  test("revoke-tokens: 200 with the client and tokensRevokedBefore = now; earlier tokens inactive, later ones active", async () => {
    t.clock.ms = T0 + 10_000;
    const early = await issueToken(t, owner);
    const others = await issueToken(t, bystander);
    t.clock.ms = T0 + 20_250;
    const res = await t.api("POST", `${path(owner)}/revoke-tokens`);
    expect(res.status).toBe(200);
    const client = await json<Record<string, unknown>>(res);
    expect(client.tokensRevokedBefore).toMatch(ISO_RE);
    expect(client).toEqual({ ...(await json<Record<string, unknown>>(await t.api("GET", path(owner)))), tokensRevokedBefore: new Date(T0 + 20_250).toISOString() });
    expect(await introspect(t, bystander, early)).toEqual({ active: false });
    expect(await isActive(t, bystander, others)).toBe(true);

    // Later in the same second: iat is the same second as the cut, so it counts as revoked too.
    t.clock.ms = T0 + 20_900;
    const sameSecond = await issueToken(t, owner);
    expect(await isActive(t, bystander, sameSecond)).toBe(false);
    t.clock.ms = T0 + 21_000;
    const nextSecond = await issueToken(t, owner);
    expect(await isActive(t, bystander, nextSecond)).toBe(true);
  });

  test("a token issued in the same millisecond before the cut, on a second boundary, is not missed", async () => {
    t.clock.ms = T0 + 30_000;
    const onBoundary = await issueToken(t, owner);
    t.clock.ms = T0 + 30_001;
    expect((await t.api("POST", `${path(owner)}/revoke-tokens`)).status).toBe(200);
    expect(await isActive(t, bystander, onBoundary)).toBe(false);
  });

  test("a cut on the first millisecond of a second catches the tokens of that second, before and after it", async () => {
    t.clock.ms = T0 + 35_000;
    const before = await issueToken(t, owner);
    expect((await t.api("POST", `${path(owner)}/revoke-tokens`)).status).toBe(200);
    const after = await issueToken(t, owner);
    expect(await isActive(t, bystander, before)).toBe(false);
    expect(await isActive(t, bystander, after)).toBe(false);
    t.clock.ms = T0 + 36_000;
    expect(await isActive(t, bystander, await issueToken(t, owner))).toBe(true);
  });

  test("the cut never moves back: a call whose clock was read earlier but whose write lands later keeps the later cut", async () => {
    t.clock.ms = T0 + 37_500;
    expect((await t.api("POST", `${path(owner)}/revoke-tokens`)).status).toBe(200);
    // As another worker whose call read the clock before this one's and committed after it.
    t.clock.ms = T0 + 37_000;
    const late = await json<Record<string, unknown>>(await t.api("POST", `${path(owner)}/revoke-tokens`));
    expect(late.tokensRevokedBefore).toBe(new Date(T0 + 37_500).toISOString());
    t.clock.ms = T0 + 38_000;
  });

  test("a cut made while the clock was ahead stays once the clock is right: the tokens issued meanwhile stay revoked", async () => {
    const other = await createTestClient(t, owner.providerId);
    t.clock.ms = T0 + 600_000;
    const leaked = await issueToken(t, other);
    t.clock.ms = T0 + 601_000;
    expect((await t.api("POST", `${path(other)}/revoke-tokens`)).status).toBe(200);
    t.clock.ms = T0 + 39_000;
    const again = await json<Record<string, unknown>>(await t.api("POST", `${path(other)}/revoke-tokens`));
    expect(again.tokensRevokedBefore).toBe(new Date(T0 + 601_000).toISOString());
    expect(await isActive(t, bystander, leaked)).toBe(false);
    t.clock.ms = T0 + 40_000;
  });

  test("the cut is shown by GET, list and PATCH, and moves forward on the next call", async () => {
    t.clock.ms = T0 + 40_000;
    const kept = await issueToken(t, owner);
    const listed = await json<{ items: Record<string, unknown>[] }>(await t.api("GET", `/v1/providers/${owner.providerId}/clients`));
    expect(listed.items.find((c) => c.id === owner.clientId)?.tokensRevokedBefore).toBe(new Date(T0 + 37_500).toISOString());
    const patched = await json<Record<string, unknown>>(await t.api("PATCH", path(owner), { name: "renamed" }));
    expect(patched.tokensRevokedBefore).toBe(new Date(T0 + 37_500).toISOString());
    expect(await isActive(t, bystander, kept)).toBe(true);
    t.clock.ms = T0 + 50_000;
    const again = await json<Record<string, unknown>>(await t.api("POST", `${path(owner)}/revoke-tokens`));
    expect(again.tokensRevokedBefore).toBe(new Date(T0 + 50_000).toISOString());
    expect(await isActive(t, bystander, kept)).toBe(false);
  });

  test("an unknown client is 404, a bad id 400, and the route needs an API key", async () => {
    await expectError(await t.api("POST", `/v1/providers/${owner.providerId}/clients/${UNKNOWN_ID}/revoke-tokens`), 404, "not_found");
    await expectError(await t.api("POST", `/v1/providers/${UNKNOWN_ID}/clients/${owner.clientId}/revoke-tokens`), 404, "not_found");
    await expectError(await t.api("POST", `/v1/providers/${owner.providerId}/clients/nope/revoke-tokens`), 400, "invalid_request", "clientId");
    const anonymous = await t.request("POST", `${path(owner)}/revoke-tokens`);
    expect(anonymous.headers.get("www-authenticate")).toStartWith("Bearer");
    await expectError(anonymous, 401, "unauthorized");
    expect(await bodyOf(await t.api("GET", path(bystander)))).not.toHaveProperty("tokensRevokedBefore");
  });
});
