/**
 * Every refusal of /oauth/token, and every other failure under /oauth/, in the RFC 6749 §5.2
 * form `{error, error_description}`: exact status, `error` value, and the Basic challenge on 401.
 * The management API keeps `{code, message}`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { expectError, UNKNOWN_ID } from "../http/support.ts";
import { basic, createSecret, expectInvalidClient, expectOAuthError, FORM, tokenRequest } from "./support.ts";

const GRANT = { grant_type: "client_credentials" };
const MAX_BODY = 64 * 1024;
const b64 = (text: string) => Buffer.from(text).toString("base64");

describe("token endpoint errors", () => {
  let t: TestApp;
  let clientId: string;
  let secret: string;
  beforeAll(async () => {
    t = await buildTestApp();
    const created = await createProviderAndClient(t);
    clientId = created.clientId;
    ({ secret } = await createSecret(t, created.providerId, clientId));
  });
  afterAll(() => t.close());

  describe("invalid_client: 401 with WWW-Authenticate: Basic", () => {
    test("wrong secret, by either method", async () => {
      await expectInvalidClient(await tokenRequest(t, GRANT, { authorization: basic(clientId, `${secret}x`) }), "wrong secret");
      await expectInvalidClient(await tokenRequest(t, { ...GRANT, client_id: clientId, client_secret: secret.slice(0, -1) }), "wrong secret");
      await expectInvalidClient(await tokenRequest(t, GRANT, { authorization: basic(clientId, "tms_") }));
    });

    test("unknown client, and a client_id that is not a UUID", async () => {
      await expectInvalidClient(await tokenRequest(t, GRANT, { authorization: basic(UNKNOWN_ID, secret) }), "unknown client");
      await expectInvalidClient(await tokenRequest(t, { ...GRANT, client_id: UNKNOWN_ID, client_secret: secret }));
      for (const id of ["nope", `${clientId}x`, `client:${clientId}`, "../../etc"]) {
        await expectInvalidClient(await tokenRequest(t, GRANT, { authorization: basic(id, secret) }));
        await expectInvalidClient(await tokenRequest(t, { ...GRANT, client_id: id, client_secret: secret }));
      }
    });

    const malformed: [string, string][] = [
      ["no credentials", "Basic"],
      ["not base64", "Basic !!!!"],
      ["bad padding", `Basic ${b64(`${clientId}:${secret}`).replace(/=+$/, "")}x`],
      ["no colon", `Basic ${b64(`${clientId}${secret}`)}`],
      ["empty id", `Basic ${b64(`:${secret}`)}`],
      ["empty secret", `Basic ${b64(`${clientId}:`)}`],
      ["bad percent-encoding", `Basic ${b64(`${clientId}:%zz`)}`],
      ["not UTF-8", `Basic ${Buffer.concat([Buffer.from(`${clientId}:`), Buffer.from([0xff, 0xfe])]).toString("base64")}`],
      ["another scheme", "Bearer abc"],
      ["empty header", ""],
    ];
    for (const [name, header] of malformed) {
      test(`malformed Authorization header: ${name}`, async () => {
        await expectInvalidClient(await tokenRequest(t, GRANT, { authorization: header }));
      });
    }

    test("no client authentication at all, or client_id without client_secret", async () => {
      await expectInvalidClient(await tokenRequest(t, GRANT), "Client authentication is required");
      await expectInvalidClient(await tokenRequest(t, { ...GRANT, client_id: clientId }));
      await expectInvalidClient(await tokenRequest(t, { ...GRANT, client_secret: secret }));
    });
  });

  test("both methods at once → 400 invalid_request", async () => {
    const res = await tokenRequest(t, { ...GRANT, client_id: clientId, client_secret: secret }, { authorization: basic(clientId, secret) });
    await expectOAuthError(res, 400, "invalid_request", "Use one client authentication method");
    await expectOAuthError(await tokenRequest(t, { ...GRANT, client_secret: secret }, { authorization: basic(clientId, secret) }), 400, "invalid_request");
  });

  test("missing grant_type → 400 invalid_request naming it", async () => {
    await expectOAuthError(await tokenRequest(t, {}, { authorization: basic(clientId, secret) }), 400, "invalid_request", "grant_type");
    await expectOAuthError(await tokenRequest(t, { grant_type: "" }, { authorization: basic(clientId, secret) }), 400, "invalid_request", "grant_type");
    await expectOAuthError(await t.request("POST", "/oauth/token", undefined, { authorization: basic(clientId, secret) }), 400, "invalid_request", "grant_type");
  });

  test("grant_type given twice → 400 invalid_request", async () => {
    const body = "grant_type=client_credentials&grant_type=client_credentials";
    await expectOAuthError(await tokenRequest(t, body, { authorization: basic(clientId, secret) }), 400, "invalid_request", "grant_type");
  });

  test("another grant_type → 400 unsupported_grant_type (after client authentication)", async () => {
    for (const grant of ["password", "authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer", "CLIENT_CREDENTIALS"]) {
      await expectOAuthError(await tokenRequest(t, { grant_type: grant }, { authorization: basic(clientId, secret) }), 400, "unsupported_grant_type");
    }
    await expectInvalidClient(await tokenRequest(t, { grant_type: "password" }, { authorization: basic(clientId, "wrong") }));
  });

  test("a JSON body → 400 invalid_request in the RFC shape, not 415", async () => {
    const res = await t.request("POST", "/oauth/token", { grant_type: "client_credentials", client_id: clientId, client_secret: secret });
    await expectOAuthError(res, 400, "invalid_request", "application/x-www-form-urlencoded");
    await expectOAuthError(await tokenRequest(t, GRANT, { "content-type": "text/plain", authorization: basic(clientId, secret) }), 400, "invalid_request");
    const untyped = new Request("http://localhost/oauth/token", { method: "POST", body: new TextEncoder().encode("grant_type=client_credentials") });
    await expectOAuthError(await t.app.handle(untyped), 400, "invalid_request");
  });

  test("a body that is not UTF-8 → 400 invalid_request", async () => {
    const body = new Uint8Array([...new TextEncoder().encode("grant_type="), 0xff]);
    await expectOAuthError(await t.app.handle(new Request("http://localhost/oauth/token", { method: "POST", body, headers: FORM })), 400, "invalid_request", "UTF-8");
  });

  test("an oversized body → 413 in the RFC shape", async () => {
    const body = `grant_type=client_credentials&pad=${"x".repeat(MAX_BODY)}`;
    await expectOAuthError(await tokenRequest(t, body, { authorization: basic(clientId, secret) }), 413, "invalid_request", String(MAX_BODY));
  });

  test("another method on an OAuth route → 405 with Allow: POST in the RFC shape", async () => {
    const get = await t.request("GET", "/oauth/token");
    expect(get.headers.get("allow")).toBe("POST");
    await expectOAuthError(get, 405, "invalid_request", "POST");
  });

  test("an unknown path under /oauth/ is an unknown route: 404 {code, message}", async () => {
    await expectError(await t.request("POST", "/oauth/nope", "a=b", FORM), 404, "not_found", "/oauth/nope");
    await expectError(await t.request("POST", "/oauth/token/extra", "a=b", FORM), 404, "not_found");
    await expectError(await t.request("GET", "/oauth"), 404, "not_found");
    // A trailing slash is still the route's own path.
    await expectOAuthError(await t.request("GET", "/oauth/token/"), 405, "invalid_request", "POST");
  });

  test("503 temporarily_unavailable with Retry-After while the service drains", async () => {
    t.ctx.draining = true;
    try {
      const res = await tokenRequest(t, GRANT, { authorization: basic(clientId, secret) });
      expect(res.headers.get("retry-after")).toBe("1");
      await expectOAuthError(res, 503, "temporarily_unavailable");
    } finally {
      t.ctx.draining = false;
    }
  });

  test("500 server_error with a generic description for a fault, and no detail", async () => {
    const original = t.ctx.store.getClientById;
    t.ctx.store.getClientById = () => Promise.reject(new Error("lmdb exploded at /secret/path"));
    try {
      const res = await tokenRequest(t, GRANT, { authorization: basic(clientId, secret) });
      const text = await res.clone().text();
      await expectOAuthError(res, 500, "server_error");
      for (const leak of ["exploded", "/secret/path", "stack", "    at "]) expect(text).not.toContain(leak);
    } finally {
      t.ctx.store.getClientById = original;
    }
    expect((await tokenRequest(t, GRANT, { authorization: basic(clientId, secret) })).status).toBe(200);
  });

  test("the management API keeps {code, message}", async () => {
    await expectError(await t.request("GET", "/v1/nope"), 401, "unauthorized");
    await expectError(await t.request("GET", "/nope"), 404, "not_found");
    await expectError(await t.request("GET", "/oauthx/token"), 404, "not_found");
  });
});
