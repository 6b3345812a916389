/**
 * POST /oauth/revoke (RFC 7009): a client revokes its own token (then introspection says
 * inactive), another client's token is refused with unauthorized_client, anything that is not an
 * active token answers 200, client authentication as at the token endpoint; revocations survive a
 * store reopen and are pruned once their token expired.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodeJwt } from "jose";
import { pruneExpiredEntries, startExpiryPruning } from "../../src/core/oauth/expiry-pruning.ts";
import { createLogger } from "../../src/logging/logger.ts";
import { buildTestApp, FakeClock, tempDir, type TestApp } from "../helpers/app.ts";
import {
  basic,
  createTestClient,
  expectInvalidClient,
  expectOAuthError,
  expectRevoked,
  formRequest,
  introspect,
  isActive,
  issueToken,
  revoke,
  type TestClient,
} from "./support.ts";

describe("revocation endpoint", () => {
  let t: TestApp;
  let owner: TestClient;
  let other: TestClient;
  beforeAll(async () => {
    t = await buildTestApp();
    owner = await createTestClient(t);
    other = await createTestClient(t, owner.providerId);
  });
  afterAll(() => t.close());

  test("revoking an own token: 200 with an empty body, not cached; introspection then says inactive", async () => {
    const token = await issueToken(t, owner);
    const sibling = await issueToken(t, owner);
    const res = await revoke(t, owner, token);
    expect(res.headers.get("pragma")).toBe("no-cache");
    await expectRevoked(res);
    expect(await introspect(t, owner, token)).toEqual({ active: false });
    expect(await introspect(t, other, token)).toEqual({ active: false });
    // Only that token: the client's other tokens stay active.
    expect(await isActive(t, owner, sibling)).toBe(true);
  });

  test("revoking by client_secret_post, and revoking again, both answer 200", async () => {
    const token = await issueToken(t, owner);
    await expectRevoked(await formRequest(t, "/oauth/revoke", { token, client_id: owner.clientId, client_secret: owner.secret }));
    await expectRevoked(await revoke(t, owner, token));
    expect(await isActive(t, owner, token)).toBe(false);
  });

  test("token_type_hint is ignored, known or not", async () => {
    for (const hint of ["access_token", "refresh_token", "id_token", "whatever"]) {
      const token = await issueToken(t, owner);
      await expectRevoked(await revoke(t, owner, token, { token_type_hint: hint }));
      expect({ hint, active: await isActive(t, owner, token) }).toEqual({ hint, active: false });
    }
  });

  test("another client's active token is refused with 400 unauthorized_client and stays active", async () => {
    const token = await issueToken(t, owner);
    await expectOAuthError(await revoke(t, other, token), 400, "unauthorized_client", "another client");
    expect(await isActive(t, owner, token)).toBe(true);
  });

  test("anything that is not an active token of the project answers 200 and changes nothing", async () => {
    const token = await issueToken(t, owner);
    const [header, payload] = token.split(".") as [string, string, string];
    for (const garbage of ["x", "a.b.c", `${header}.${payload}.AAAA`, `${token}x`]) await expectRevoked(await revoke(t, owner, garbage));
    // Another client's token that is already revoked is no longer a token to refuse.
    await expectRevoked(await revoke(t, owner, token));
    await expectRevoked(await revoke(t, other, token));
    const stillActive = await issueToken(t, owner);
    for (const garbage of ["x", `${stillActive}x`]) await expectRevoked(await revoke(t, other, garbage));
    expect(await isActive(t, owner, stillActive)).toBe(true);
  });

  test("client authentication is required: 401 invalid_client with the Basic challenge; nothing is revoked", async () => {
    const token = await issueToken(t, owner);
    await expectInvalidClient(await formRequest(t, "/oauth/revoke", { token }), "Client authentication is required");
    await expectInvalidClient(await formRequest(t, "/oauth/revoke", { token }, { authorization: basic(owner.clientId, `${owner.secret}x`) }), "wrong secret");
    await expectInvalidClient(await formRequest(t, "/oauth/revoke", { token, client_id: owner.clientId, client_secret: "nope" }));
    expect(await isActive(t, owner, token)).toBe(true);
  });

  test("a missing or repeated token, or a JSON body, is 400 invalid_request; GET is 405", async () => {
    await expectOAuthError(await formRequest(t, "/oauth/revoke", {}, owner.auth), 400, "invalid_request", "token");
    await expectOAuthError(await formRequest(t, "/oauth/revoke", "token=a&token=b", owner.auth), 400, "invalid_request", "token");
    await expectOAuthError(await t.request("POST", "/oauth/revoke", { token: "x" }, owner.auth), 400, "invalid_request", "form-encoded");
    await expectOAuthError(await t.request("GET", "/oauth/revoke", undefined, owner.auth), 405, "invalid_request");
  });

  test("an expired own token answers 200 and stores nothing", async () => {
    const token = await issueToken(t, owner);
    const start = t.clock.ms;
    const farFuture = start + 86_400_000;
    // Clears the revocations of the tests before, so the count below is this test's alone.
    await t.ctx.store.pruneExpired(farFuture, 1000);
    t.clock.advance(3600);
    try {
      await expectRevoked(await revoke(t, owner, token));
      expect(await t.ctx.store.pruneExpired(farFuture, 1000)).toBe(0);
    } finally {
      t.clock.ms = start;
    }
  });
});

describe("revocations are durable and pruned", () => {
  test("a revocation survives closing and reopening the store", async () => {
    const dir = tempDir();
    const clock = new FakeClock();
    try {
      const first = await buildTestApp({ dataDir: dir.path, clock });
      const owner = await createTestClient(first);
      const revoked = await issueToken(first, owner);
      const kept = await issueToken(first, owner);
      await expectRevoked(await revoke(first, owner, revoked));
      await first.close();

      const second = await buildTestApp({ dataDir: dir.path, masterKey: first.masterKey, clock });
      try {
        expect(await introspect(second, owner, revoked)).toEqual({ active: false });
        expect(await isActive(second, owner, kept)).toBe(true);
      } finally {
        await second.close();
      }
    } finally {
      dir.remove();
    }
  });

  test("a revocation is pruned once its token expired, and not before", async () => {
    const t = await buildTestApp();
    try {
      const owner = await createTestClient(t);
      const token = await issueToken(t, owner);
      const jti = decodeJwt(token).jti as string;
      const issuedAt = t.clock.now();
      await expectRevoked(await revoke(t, owner, token));
      t.clock.advance(3599);
      expect(await pruneExpiredEntries(t.ctx.store, t.clock.now())).toBe(0);
      expect(await isActive(t, owner, token)).toBe(false);
      t.clock.advance(1);
      expect(await pruneExpiredEntries(t.ctx.store, t.clock.now())).toBe(1);
      // The entry is gone: asked about an instant when it applied, the store no longer knows it.
      expect(await t.ctx.store.isTokenRevoked(t.ctx.projectId, jti, issuedAt)).toBe(false);
      expect(await isActive(t, owner, token)).toBe(false);
    } finally {
      await t.close();
    }
  });

  test("pruning works through many entries in bounded batches", async () => {
    const t = await buildTestApp();
    try {
      for (let i = 0; i < 25; i++) await t.ctx.store.revokeToken(t.ctx.projectId, `jti-${i}`, t.clock.now() + 1000, t.clock.now());
      expect(await pruneExpiredEntries(t.ctx.store, t.clock.now() + 1000, 10)).toBe(25);
      expect(await t.ctx.store.pruneExpired(t.clock.now() + 1000, 10)).toBe(0);
    } finally {
      await t.close();
    }
  });

  test("startExpiryPruning prunes at start and logs how many; stopping waits for the pass", async () => {
    const lines: string[] = [];
    const t = await buildTestApp();
    try {
      const owner = await createTestClient(t);
      await expectRevoked(await revoke(t, owner, await issueToken(t, owner)));
      await expectRevoked(await revoke(t, owner, await issueToken(t, owner)));
      t.clock.advance(3600);
      const logger = createLogger("info", (line) => lines.push(line), t.clock.now);
      const stop = startExpiryPruning({ store: t.ctx.store, now: t.clock.now, logger });
      await stop();
      const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((l) => l.msg === "expired revocations and assertion ids removed");
      expect(logged.map((l) => l.count)).toEqual([2]);
      expect(await t.ctx.store.pruneExpired(t.clock.now(), 100)).toBe(0);
    } finally {
      await t.close();
    }
  });
});
