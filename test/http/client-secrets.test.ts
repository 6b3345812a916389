/**
 * Client secrets through the management API: shown once, listed without the secret, at most two
 * per client, revocation effective at once, gone with their client, scoped by provider and
 * project, and behind the API key.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { hashSecret } from "../../src/core/secret-hash.ts";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { basic, createSecret, expectInvalidClient, tokenRequest } from "../oauth/support.ts";
import { expectError, ISO_RE, json, UNKNOWN_ID, UUID_RE } from "./support.ts";

const SECRET_RE = /^tms_[A-Za-z0-9_-]{43}$/;

describe("client secrets", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(() => t.close());

  const secretsPath = (providerId: string, clientId: string) => `/v1/providers/${providerId}/clients/${clientId}/secrets`;
  const list = async (providerId: string, clientId: string) => {
    const res = await t.api("GET", secretsPath(providerId, clientId));
    expect(res.status).toBe(200);
    return json<{ items: Record<string, unknown>[] }>(res);
  };
  /** The token endpoint's status for a client secret (client_secret_basic). */
  const tokenStatus = async (clientId: string, secret: string) =>
    (await tokenRequest(t, { grant_type: "client_credentials" }, { authorization: basic(clientId, secret) })).status;

  test("create answers 201 with {id, secret, lastFour, createdAt} once, uncached; only a hash is stored", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const res = await t.api("POST", secretsPath(providerId, clientId));
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = await json<Record<string, string>>(res);
    expect(Object.keys(body)).toEqual(["id", "secret", "lastFour", "createdAt"]);
    expect(body.id).toMatch(UUID_RE);
    expect(body.secret).toMatch(SECRET_RE);
    expect(body.lastFour).toBe((body.secret as string).slice(-4));
    expect(body.createdAt).toMatch(ISO_RE);
    expect(body.createdAt).toBe(new Date(t.clock.now()).toISOString());

    const stored = await t.ctx.store.listClientSecrets(t.ctx.projectId, clientId);
    expect(stored).toHaveLength(1);
    expect(stored[0]?.hash).toBe(hashSecret(body.secret as string));
    expect(JSON.stringify(stored)).not.toContain((body.secret as string).slice(4, -4));
  });

  test("list shows id, lastFour and createdAt, oldest first, and never the secret or its hash", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    expect(await list(providerId, clientId)).toEqual({ items: [] });
    const first = await createSecret(t, providerId, clientId);
    t.clock.advance(1);
    const second = await createSecret(t, providerId, clientId);
    t.clock.advance(-1);
    expect(second.secret).not.toBe(first.secret);
    const listed = await list(providerId, clientId);
    expect(listed).toEqual({
      items: [
        { id: first.id, lastFour: first.lastFour, createdAt: first.createdAt },
        { id: second.id, lastFour: second.lastFour, createdAt: second.createdAt },
      ],
    });
    const text = JSON.stringify(listed);
    for (const secret of [first.secret, second.secret]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(hashSecret(secret));
    }
  });

  test("a third secret is 409 conflict telling to revoke one; revoking one makes room", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const first = await createSecret(t, providerId, clientId);
    await createSecret(t, providerId, clientId);
    await expectError(await t.api("POST", secretsPath(providerId, clientId)), 409, "conflict", "revoke");
    expect((await list(providerId, clientId)).items).toHaveLength(2);
    expect((await t.api("DELETE", `${secretsPath(providerId, clientId)}/${first.id}`)).status).toBe(204);
    await createSecret(t, providerId, clientId);
    expect((await list(providerId, clientId)).items).toHaveLength(2);
  });

  test("revoke is 204; that secret stops working at once while the other keeps working; twice is 404", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const old = await createSecret(t, providerId, clientId);
    const replacement = await createSecret(t, providerId, clientId);
    expect(await tokenStatus(clientId, old.secret)).toBe(200);
    expect(await tokenStatus(clientId, replacement.secret)).toBe(200);

    const res = await t.api("DELETE", `${secretsPath(providerId, clientId)}/${old.id}`);
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    await expectInvalidClient(await tokenRequest(t, { grant_type: "client_credentials" }, { authorization: basic(clientId, old.secret) }));
    expect(await tokenStatus(clientId, replacement.secret)).toBe(200);
    expect((await list(providerId, clientId)).items.map((s) => s.id)).toEqual([replacement.id]);
    await expectError(await t.api("DELETE", `${secretsPath(providerId, clientId)}/${old.id}`), 404, "not_found", old.id);
  });

  test("deleting the client deletes its secrets and its access to the token endpoint", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const { secret } = await createSecret(t, providerId, clientId);
    expect(await tokenStatus(clientId, secret)).toBe(200);
    expect((await t.api("DELETE", `/v1/providers/${providerId}/clients/${clientId}`)).status).toBe(204);
    expect(await t.ctx.store.listClientSecrets(t.ctx.projectId, clientId)).toEqual([]);
    await expectInvalidClient(await tokenRequest(t, { grant_type: "client_credentials" }, { authorization: basic(clientId, secret) }));
    await expectError(await t.api("GET", secretsPath(providerId, clientId)), 404, "not_found");
    // The provider is empty again, so it can go.
    expect((await t.api("DELETE", `/v1/providers/${providerId}`)).status).toBe(204);
  });

  test("wrong provider, client or secret ids → 404; malformed ids → 400", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const secret = await createSecret(t, providerId, clientId);
    const other = await createProviderAndClient(t);
    for (const path of [secretsPath(UNKNOWN_ID, clientId), secretsPath(providerId, UNKNOWN_ID), secretsPath(other.providerId, clientId)]) {
      await expectError(await t.api("POST", path), 404, "not_found");
      await expectError(await t.api("GET", path), 404, "not_found");
      await expectError(await t.api("DELETE", `${path}/${secret.id}`), 404, "not_found");
    }
    // Another client's secret id, and an unknown one.
    await expectError(await t.api("DELETE", `${secretsPath(other.providerId, other.clientId)}/${secret.id}`), 404, "not_found");
    await expectError(await t.api("DELETE", `${secretsPath(providerId, clientId)}/${UNKNOWN_ID}`), 404, "not_found");
    expect((await list(providerId, clientId)).items).toHaveLength(1);

    await expectError(await t.api("GET", secretsPath(providerId, "nope")), 400, "invalid_request", "clientId");
    await expectError(await t.api("POST", secretsPath("nope", clientId)), 400, "invalid_request", "providerId");
    await expectError(await t.api("DELETE", `${secretsPath(providerId, clientId)}/nope`), 400, "invalid_request", "secretId");
  });

  test("the body: empty or {} is fine, an unknown field is 400, a non-JSON body is 415", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    expect((await t.api("POST", secretsPath(providerId, clientId), {})).status).toBe(201);
    await expectError(await t.api("POST", secretsPath(providerId, clientId), { expiresIn: 60 }), 400, "invalid_request", "expiresIn");
    await expectError(await t.api("POST", secretsPath(providerId, clientId), "a=b", { "content-type": "application/x-www-form-urlencoded" }), 415, "unsupported_media_type");
    expect((await list(providerId, clientId)).items).toHaveLength(1);
  });

  test("every secrets route needs the API key", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const { id } = await createSecret(t, providerId, clientId);
    for (const [method, path] of [
      ["POST", secretsPath(providerId, clientId)],
      ["GET", secretsPath(providerId, clientId)],
      ["DELETE", `${secretsPath(providerId, clientId)}/${id}`],
    ] as const) {
      const res = await t.request(method, path);
      expect(res.headers.get("www-authenticate")).toStartWith("Bearer");
      await expectError(res, 401, "unauthorized");
    }
    expect((await list(providerId, clientId)).items.map((s) => s.id)).toEqual([id]);
  });
});
