/**
 * Many projects on one instance: GET/PATCH /v1/project, API keys that never cross projects, Host
 * routing of discovery, JWKS and /oauth/token, per-host issuers, custom domains and
 * forceDefaultDomain, and the per-project settings (algorithm, rotation period, token lifetime).
 */
import { afterEach, beforeEach, describe, expect, spyOn, test } from "bun:test";
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify, SignJWT, type JSONWebKeySet } from "jose";
import { createApiKey } from "../../src/core/api-keys.ts";
import { createProject, updateProject } from "../../src/core/projects.ts";
import { buildTestApp, createProviderAndClient, tempDir, type TestApp } from "../helpers/app.ts";
import { basic, createSecret, expectOAuthError, FORM } from "../oauth/support.ts";
import { expectError, json } from "./support.ts";

const PUBLIC = "https://tokens.example.test";
const ACME_HOST = "acme.tokens.example.test";
const ACME = `https://${ACME_HOST}`;

interface ProjectBody {
  id: string;
  name: string;
  slug: string;
  url: string;
  customDomain: string | null;
  issuer: string;
  signingAlg: string;
  keyRotationPeriod: number;
  defaultTokenLifetime: number;
  createdAt: string;
  updatedAt: string;
}

describe("projects", () => {
  let t: TestApp;
  /** The second project's id and an API key of it. */
  let acme: { id: string; apiKey: string };
  const asAcme = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    t.request(method, path, body, { authorization: `Bearer ${acme.apiKey}`, ...headers });
  const atHost = (host: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    t.request(method, path, body, { host, ...headers });
  const discovery = async (host: string) => json<Record<string, string>>(await atHost(host, "GET", "/.well-known/openid-configuration"));
  const jwks = async (host: string) => json<JSONWebKeySet>(await atHost(host, "GET", "/.well-known/jwks"));
  /** Moves the clock on by `seconds` and runs a key maintenance pass, as the timer would. */
  const tickAfter = async (seconds: number) => {
    t.clock.advance(seconds);
    await t.ctx.keys.tick();
  };

  beforeEach(async () => {
    t = await buildTestApp({ publicUrl: PUBLIC });
    const record = await createProject(t.ctx.store, { slug: "acme", name: "Acme" }, t.ctx.config, t.clock.now());
    await t.ctx.keys.tick();
    acme = { id: record.id, apiKey: (await createApiKey(t.ctx.store, record.id, "acme", t.clock.now())).secret };
  });
  afterEach(() => t.close());

  test("GET /v1/project shows the caller's project with its effective settings", async () => {
    const own = await json<ProjectBody>(await t.api("GET", "/v1/project"));
    expect(own).toEqual({
      id: t.ctx.projectId,
      name: "default",
      slug: "default",
      url: PUBLIC,
      customDomain: null,
      issuer: PUBLIC,
      signingAlg: "ES256",
      keyRotationPeriod: 86400,
      defaultTokenLifetime: 3600,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const other = await json<ProjectBody>(await asAcme("GET", "/v1/project"));
    expect(other).toMatchObject({ id: acme.id, name: "Acme", slug: "acme", url: ACME, issuer: ACME, customDomain: null });
  });

  test("an API key never sees another project's providers, clients or keys (404)", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    for (const path of [`/v1/providers/${providerId}`, `/v1/providers/${providerId}/clients/${clientId}`]) {
      await expectError(await asAcme("GET", path), 404, "not_found");
    }
    await expectError(await asAcme("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, {}), 404, "not_found");
    expect((await json<{ items: unknown[] }>(await asAcme("GET", "/v1/providers"))).items).toEqual([]);
    const ownKids = (await json<{ items: { kid: string }[] }>(await t.api("GET", "/v1/keys"))).items.map((k) => k.kid);
    const acmeKids = (await json<{ items: { kid: string }[] }>(await asAcme("GET", "/v1/keys"))).items.map((k) => k.kid);
    expect(acmeKids.some((kid) => ownKids.includes(kid))).toBe(false);
    await expectError(await asAcme("POST", `/v1/keys/${ownKids[0]}/revoke`), 404, "not_found");
  });

  test("discovery and JWKS are routed by Host; each host's issuer is its own URL", async () => {
    const main = await discovery("localhost");
    const other = await discovery(ACME_HOST);
    expect(main.issuer).toBe(PUBLIC);
    expect(other.issuer).toBe(ACME);
    expect(other.jwks_uri).toBe(`${ACME}/.well-known/jwks`);
    expect(other.token_endpoint).toBe(`${ACME}/oauth/token`);
    // Host names compare case-insensitively and a port or trailing dot is tolerated.
    expect((await discovery("ACME.tokens.example.test.:443")).issuer).toBe(ACME);
    // An unknown host is the default project; X-Forwarded-Host is never read.
    expect((await discovery("evil.example.test")).issuer).toBe(PUBLIC);
    const forwarded = await atHost("localhost", "GET", "/.well-known/openid-configuration", undefined, { "x-forwarded-host": ACME_HOST });
    expect((await json<Record<string, string>>(forwarded)).issuer).toBe(PUBLIC);

    const mainKids = (await jwks("localhost")).keys.map((k) => k.kid);
    const acmeKids = (await jwks(ACME_HOST)).keys.map((k) => k.kid);
    expect(acmeKids).toHaveLength(2);
    expect(acmeKids.some((kid) => mainKids.includes(kid))).toBe(false);
  });

  test("custom domain: its own issuer, the same keys, and forceDefaultDomain for the project's own URL", async () => {
    const patched = await json<ProjectBody>(await asAcme("PATCH", "/v1/project", { customDomain: "Auth.Acme.TEST" }));
    expect(patched).toMatchObject({ customDomain: "auth.acme.test", url: ACME, issuer: "https://auth.acme.test" });
    expect((await discovery("auth.acme.test")).issuer).toBe("https://auth.acme.test");
    expect((await discovery(ACME_HOST)).issuer).toBe(ACME);
    expect(await jwks("auth.acme.test")).toEqual(await jwks(ACME_HOST));

    const provider = await json<{ id: string }>(await asAcme("POST", "/v1/providers", { name: "p" }));
    const client = await json<{ id: string }>(await asAcme("POST", `/v1/providers/${provider.id}/clients`, { name: "c", audience: "urn:api" }));
    const tokenPath = `/v1/providers/${provider.id}/clients/${client.id}/tokens`;
    const custom = (await json<{ accessToken: string }>(await asAcme("POST", tokenPath, {}))).accessToken;
    const own = (await json<{ accessToken: string }>(await asAcme("POST", tokenPath, { forceDefaultDomain: true }))).accessToken;
    expect(decodeJwt(custom).iss).toBe("https://auth.acme.test");
    expect(decodeJwt(own).iss).toBe(ACME);
    const keys = createLocalJWKSet(await jwks("auth.acme.test"));
    const at = { currentDate: new Date(t.clock.now()), audience: "urn:api" };
    await jwtVerify(custom, keys, { ...at, issuer: "https://auth.acme.test" });
    await jwtVerify(own, keys, { ...at, issuer: ACME });

    // A domain another project holds is a conflict; removing it frees it.
    await expectError(await t.api("PATCH", "/v1/project", { customDomain: "auth.acme.test" }), 409, "conflict", "auth.acme.test");
    // On another port it is the same domain.
    await expectError(await t.api("PATCH", "/v1/project", { customDomain: "auth.acme.test:8443" }), 409, "conflict", "auth.acme.test");
    // null is never a valid value: it is refused and changes nothing; "" removes the domain.
    await expectError(await asAcme("PATCH", "/v1/project", { customDomain: null }), 400, "invalid_request", "customDomain");
    expect(await json<ProjectBody>(await asAcme("GET", "/v1/project"))).toMatchObject({ customDomain: "auth.acme.test" });
    await expectError(await asAcme("PATCH", "/v1/project", { customDomain: " " }), 400, "invalid_request", "customDomain");
    expect(await json<ProjectBody>(await asAcme("PATCH", "/v1/project", { customDomain: "" }))).toMatchObject({ customDomain: null, issuer: ACME });
    expect((await discovery("auth.acme.test")).issuer).toBe(PUBLIC);
    expect(await json<ProjectBody>(await t.api("PATCH", "/v1/project", { customDomain: "auth.acme.test" }))).toMatchObject({ issuer: "https://auth.acme.test" });
  });

  test("an internationalized custom domain is stored and served in its ASCII form, the one Host headers carry", async () => {
    const patched = await json<ProjectBody>(await asAcme("PATCH", "/v1/project", { customDomain: "Bücher.Example:8443" }));
    expect(patched).toMatchObject({ customDomain: "xn--bcher-kva.example:8443", issuer: "https://xn--bcher-kva.example:8443" });
    expect((await discovery("xn--bcher-kva.example:8443")).issuer).toBe("https://xn--bcher-kva.example:8443");
    // The same domain in either form is the same domain: another project cannot take it.
    await expectError(await t.api("PATCH", "/v1/project", { customDomain: "xn--bcher-kva.example:8443" }), 409, "conflict");
    await expectError(await t.api("PATCH", "/v1/project", { customDomain: "bücher.example:8443" }), 409, "conflict");
    // A name without an ASCII form is refused.
    await expectError(await asAcme("PATCH", "/v1/project", { customDomain: "xn--zz.example" }), 400, "invalid_request", "customDomain");
    await expectError(await asAcme("PATCH", "/v1/project", { customDomain: "b\u00fccher..example" }), 400, "invalid_request", "customDomain");
  });

  test("/oauth/token is routed by Host: a client authenticates only at its own project's hosts", async () => {
    const provider = await json<{ id: string }>(await asAcme("POST", "/v1/providers", { name: "p" }));
    const client = await json<{ id: string }>(await asAcme("POST", `/v1/providers/${provider.id}/clients`, { name: "c", audience: "urn:api" }));
    const secret = (await json<{ secret: string }>(await asAcme("POST", `/v1/providers/${provider.id}/clients/${client.id}/secrets`))).secret;
    const ask = (host: string) =>
      atHost(host, "POST", "/oauth/token", "grant_type=client_credentials", { ...FORM, authorization: basic(client.id, secret) });

    const answer = await json<{ access_token: string }>(await ask(ACME_HOST));
    expect(decodeJwt(answer.access_token).iss).toBe(ACME);
    await expectOAuthError(await ask("localhost"), 401, "invalid_client");

    await asAcme("PATCH", "/v1/project", { customDomain: "auth.acme.test" });
    const viaCustom = await json<{ access_token: string }>(await ask("auth.acme.test"));
    expect(decodeJwt(viaCustom.access_token).iss).toBe("https://auth.acme.test");
    // The default project's clients do not authenticate at acme's hosts either.
    const own = await createProviderAndClient(t);
    const ownSecret = await createSecret(t, own.providerId, own.clientId);
    const res = await atHost(ACME_HOST, "POST", "/oauth/token", "grant_type=client_credentials", { ...FORM, authorization: basic(own.clientId, ownSecret.secret) });
    await expectOAuthError(res, 401, "invalid_client");
  });

  test("introspection and revocation are routed by Host and accept the project's tokens of both its hosts", async () => {
    await asAcme("PATCH", "/v1/project", { customDomain: "auth.acme.test" });
    const provider = await json<{ id: string }>(await asAcme("POST", "/v1/providers", { name: "p" }));
    const client = await json<{ id: string }>(await asAcme("POST", `/v1/providers/${provider.id}/clients`, { name: "c", audience: "urn:api" }));
    const secret = (await json<{ secret: string }>(await asAcme("POST", `/v1/providers/${provider.id}/clients/${client.id}/secrets`))).secret;
    const tokenPath = `/v1/providers/${provider.id}/clients/${client.id}/tokens`;
    const viaCustom = (await json<{ accessToken: string }>(await asAcme("POST", tokenPath, {}))).accessToken;
    const viaOwn = (await json<{ accessToken: string }>(await asAcme("POST", tokenPath, { forceDefaultDomain: true }))).accessToken;
    const call = (host: string, path: string, token: string) =>
      atHost(host, "POST", path, new URLSearchParams({ token }).toString(), { ...FORM, authorization: basic(client.id, secret) });
    const active = async (host: string, token: string) => (await json<{ active: boolean; iss?: string }>(await call(host, "/oauth/introspect", token)));

    for (const host of [ACME_HOST, "auth.acme.test"]) {
      expect(await active(host, viaCustom)).toMatchObject({ active: true, iss: "https://auth.acme.test" });
      expect(await active(host, viaOwn)).toMatchObject({ active: true, iss: ACME });
    }
    // At the default project's host the client does not exist.
    await expectOAuthError(await call("localhost", "/oauth/introspect", viaOwn), 401, "invalid_client");

    expect((await call("auth.acme.test", "/oauth/revoke", viaOwn)).status).toBe(200);
    expect(await active(ACME_HOST, viaOwn)).toEqual({ active: false });
    expect((await active(ACME_HOST, viaCustom)).active).toBe(true);
  });

  test("private_key_jwt at a project's host: the assertion's aud must name that host", async () => {
    const provider = await json<{ id: string }>(await asAcme("POST", "/v1/providers", { name: "p" }));
    const client = await json<{ id: string }>(await asAcme("POST", `/v1/providers/${provider.id}/clients`, { name: "c", audience: "urn:api" }));
    const key = await generateKeyPair("ES256", { extractable: true });
    const put = await asAcme("PUT", `/v1/providers/${provider.id}/clients/${client.id}/jwks`, { keys: [await exportJWK(key.publicKey)] });
    expect(put.status).toBe(200);
    const now = Math.floor(t.clock.now() / 1000);
    const ask = async (aud: string) => {
      const assertion = await new SignJWT({})
        .setProtectedHeader({ alg: "ES256" })
        .setIssuer(client.id)
        .setSubject(client.id)
        .setAudience(aud)
        .setJti(crypto.randomUUID())
        .setIssuedAt(now)
        .setExpirationTime(now + 60)
        .sign(key.privateKey);
      const form = new URLSearchParams({
        grant_type: "client_credentials",
        client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        client_assertion: assertion,
      });
      return atHost(ACME_HOST, "POST", "/oauth/token", form.toString(), FORM);
    };
    expect((await ask(`${ACME}/oauth/token`)).status).toBe(200);
    expect((await ask(ACME)).status).toBe(200);
    await expectOAuthError(await ask(`${PUBLIC}/oauth/token`), 401, "invalid_client", "aud");
  });

  test("defaultTokenLifetime applies to REST tokens without expiresIn and to /oauth/token", async () => {
    expect((await json<ProjectBody>(await t.api("PATCH", "/v1/project", { defaultTokenLifetime: 600 }))).defaultTokenLifetime).toBe(600);
    const { providerId, clientId } = await createProviderAndClient(t);
    const token = (await json<{ accessToken: string }>(await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, {}))).accessToken;
    const claims = decodeJwt(token);
    expect((claims.exp as number) - (claims.iat as number)).toBe(600);
    const explicit = (await json<{ accessToken: string }>(await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, { expiresIn: 60 }))).accessToken;
    expect((decodeJwt(explicit).exp as number) - (decodeJwt(explicit).iat as number)).toBe(60);
    const secret = await createSecret(t, providerId, clientId);
    const res = await t.request("POST", "/oauth/token", "grant_type=client_credentials", { ...FORM, authorization: basic(clientId, secret.secret) });
    expect((await json<{ expires_in: number }>(res)).expires_in).toBe(600);
  });

  test("a new signing algorithm is published as the next key first, signs after rotation, and old tokens keep verifying", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const issue = async () => (await json<{ accessToken: string }>(await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, {}))).accessToken;
    const before = await issue();
    expect(decodeProtectedHeader(before).alg).toBe("ES256");

    expect((await json<ProjectBody>(await t.api("PATCH", "/v1/project", { signingAlg: "EdDSA" }))).signingAlg).toBe("EdDSA");
    const keys = (await json<{ items: { kid: string; alg: string; state: string }[] }>(await t.api("GET", "/v1/keys"))).items;
    expect(keys.map((k) => [k.state, k.alg])).toEqual([
      ["current", "ES256"],
      ["next", "EdDSA"],
    ]);
    // The new key is in the JWKS before it signs; until the rotation the old one keeps signing.
    expect((await jwks("localhost")).keys.map((k) => k.alg).sort()).toEqual(["ES256", "EdDSA"]);
    expect(decodeProtectedHeader(await issue()).alg).toBe("ES256");
    await expectError(await t.api("POST", "/v1/keys/rotate"), 409, "conflict");

    t.clock.advance(t.ctx.keys.jwksMaxAge(t.ctx.projectId) + 1);
    expect((await t.api("POST", "/v1/keys/rotate")).status).toBe(200);
    const after = await issue();
    expect(decodeProtectedHeader(after).alg).toBe("EdDSA");
    const set = createLocalJWKSet(await jwks("localhost"));
    for (const token of [before, after]) {
      await jwtVerify(token, set, { currentDate: new Date(t.clock.now()), issuer: PUBLIC, audience: "https://api.example.test" });
    }
  });

  test("keyRotationPeriod sets the project's JWKS max-age and rotation schedule", async () => {
    await asAcme("PATCH", "/v1/project", { keyRotationPeriod: 120 });
    await t.ctx.keys.tick();
    const res = await atHost(ACME_HOST, "GET", "/.well-known/jwks");
    expect(res.headers.get("cache-control")).toBe("public, max-age=60");
    expect((await atHost("localhost", "GET", "/.well-known/jwks")).headers.get("cache-control")).toBe("public, max-age=300");
    const current = async () => (await json<{ items: { kid: string; state: string }[] }>(await asAcme("GET", "/v1/keys"))).items.find((k) => k.state === "current")?.kid;
    const first = await current();
    // The first rotation waits until the next key has been published for the former max-age, 300 s
    // (a JWKS without it may have been cached that long); from then on, every 120 s.
    await tickAfter(121);
    expect(await current()).toBe(first);
    await tickAfter(300 - 121);
    const second = await current();
    expect(second).not.toBe(first);
    await tickAfter(119);
    expect(await current()).toBe(second);
    await tickAfter(1);
    expect(await current()).not.toBe(second);
    await asAcme("PATCH", "/v1/project", { keyRotationPeriod: 0 });
    expect((await json<ProjectBody>(await asAcme("GET", "/v1/project"))).keyRotationPeriod).toBe(0);
  });

  test("a shortened rotation period never lets a key sign while a JWKS cached under the longer max-age lacks it", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const issue = async () =>
      decodeProtectedHeader((await json<{ accessToken: string }>(await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, {}))).accessToken).kid as string;
    // A verifier fetches the JWKS, which it may hold for 300 s ...
    t.clock.advance(301);
    const fetchedAt = t.clock.now();
    const res = await atHost("localhost", "GET", "/.well-known/jwks");
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    const cached = new Set((await json<JSONWebKeySet>(res)).keys.map((k) => k.kid));
    // ... then a rotation publishes a new next key, and the period is shortened to 60 s (max-age 30).
    t.clock.advance(1);
    expect((await t.api("POST", "/v1/keys/rotate")).status).toBe(200);
    t.clock.advance(5);
    expect((await t.api("PATCH", "/v1/project", { keyRotationPeriod: 60 })).status).toBe(200);
    expect((await atHost("localhost", "GET", "/.well-known/jwks")).headers.get("cache-control")).toBe("public, max-age=30");
    // Second by second, the timer running: while the verifier may hold its JWKS, every token's key is in it.
    while (t.clock.now() < fetchedAt + 300_000) {
      await t.ctx.keys.tick();
      expect(cached).toContain(await issue());
      if (t.clock.now() >= fetchedAt + 100_000) await expectError(await t.api("POST", "/v1/keys/rotate"), 409, "conflict");
      t.clock.advance(1);
    }
    // Then the new key signs, and the shorter period applies: the next rotation 60 s later.
    await tickAfter(1);
    const next = await issue();
    expect(cached).not.toContain(next);
    await tickAfter(59);
    expect(await issue()).toBe(next);
    await tickAfter(1);
    expect(await issue()).not.toBe(next);
  });

  test("the JWKS is never served with a longer max-age than its key set records, whoever changed the period", async () => {
    const maxAge = async () => (await atHost(ACME_HOST, "GET", "/.well-known/jwks")).headers.get("cache-control");
    const changedElsewhere = async (keyRotationPeriod: number) => {
      // Another process (the CLI, another worker) writes the period; this one reloads the
      // project, as on its next request, before its key pass has run.
      await updateProject(t.ctx.store, acme.id, { keyRotationPeriod }, t.ctx.config, t.clock.now());
      await t.ctx.projects.refreshOnly([acme.id]);
    };
    await asAcme("PATCH", "/v1/project", { keyRotationPeriod: 60 });
    expect(await maxAge()).toBe("public, max-age=30");
    // Lengthened: served as before until a pass has recorded the longer max-age ...
    await changedElsewhere(86_400);
    expect(await maxAge()).toBe("public, max-age=30");
    await t.ctx.keys.tick();
    expect(await maxAge()).toBe("public, max-age=300");
    // ... so a set never lacks the record of a max-age it was served with: shortened before a
    // pass, the JWKS served 300 s holds the next key back for that long.
    await changedElsewhere(60);
    expect(await maxAge()).toBe("public, max-age=30");
    await t.ctx.keys.tick();
    const set = await t.ctx.store.getKeySet(acme.id);
    expect(set?.servedMaxAge).toBe(30);
    expect(set?.cachedUntil).toBe(t.clock.now() + 300_000);
  });

  test("PATCH /v1/project rejects bad input field by field and changes nothing", async () => {
    const before = await json<ProjectBody>(await t.api("GET", "/v1/project"));
    const cases: [unknown, string][] = [
      [{ signingAlg: "HS256" }, "signingAlg"],
      [{ keyRotationPeriod: 30 }, "keyRotationPeriod"],
      [{ keyRotationPeriod: -1 }, "keyRotationPeriod"],
      [{ defaultTokenLifetime: 0 }, "defaultTokenLifetime"],
      [{ defaultTokenLifetime: 172801 }, "defaultTokenLifetime"],
      [{ customDomain: "not a host" }, "customDomain"],
      [{ customDomain: ACME_HOST }, "customDomain"],
      [{ customDomain: "tokens.example.test" }, "customDomain"],
      // The public host or the base domain on any port, the default one included.
      [{ customDomain: "tokens.example.test:443" }, "customDomain"],
      [{ customDomain: "tokens.example.test:8443" }, "customDomain"],
      [{ customDomain: "TOKENS.example.test.:0443" }, "customDomain"],
      [{ customDomain: `${ACME_HOST}:443` }, "customDomain"],
      // An address or a single name: what callers of the instance itself use.
      [{ customDomain: "127.0.0.1" }, "customDomain"],
      [{ customDomain: "10.0.0.7:8080" }, "customDomain"],
      [{ customDomain: "0.0.0.0" }, "customDomain"],
      [{ customDomain: "tokenmint" }, "customDomain"],
      [{ customDomain: "localhost:8080" }, "customDomain"],
      [{ name: "" }, "name"],
      [{ slug: "other" }, "slug"],
    ];
    for (const [body, mention] of cases) {
      await expectError(await t.api("PATCH", "/v1/project", body), 400, "invalid_request", mention);
    }
    expect(await json<ProjectBody>(await t.api("GET", "/v1/project"))).toEqual(before);
    await expectError(await t.request("GET", "/v1/project"), 401, "unauthorized");
  });

  test("PATCH /v1/project with no field answers the project as it is and writes nothing", async () => {
    const before = await json<ProjectBody>(await t.api("GET", "/v1/project"));
    t.clock.advance(5);
    // Nor does it reload the directory or run a key pass.
    const reloads = [spyOn(t.ctx.projects, "refresh"), spyOn(t.ctx.projects, "refreshOnly"), spyOn(t.ctx.keys, "tick")];
    const res = await t.api("PATCH", "/v1/project", {});
    expect(res.status).toBe(200);
    expect(await json<ProjectBody>(res)).toEqual(before);
    for (const reload of reloads) expect(reload).not.toHaveBeenCalled();
    expect(await json<ProjectBody>(await t.api("GET", "/v1/project"))).toEqual(before);
  });

  test("a project name is 1 to 200 characters counted as code points, as every text field of the API", async () => {
    const name = "🔑".repeat(200);
    expect(await json<ProjectBody>(await t.api("PATCH", "/v1/project", { name }))).toMatchObject({ name });
    await expectError(await t.api("PATCH", "/v1/project", { name: `${name}🔑` }), 400, "invalid_request", "name");
    expect(await json<ProjectBody>(await t.api("GET", "/v1/project"))).toMatchObject({ name });
  });

  test("a custom domain is stored canonical: the scheme's default port dropped, the port without leading zeros", async () => {
    expect(await json<ProjectBody>(await asAcme("PATCH", "/v1/project", { customDomain: "Auth.Acme.test.:443" }))).toMatchObject({
      customDomain: "auth.acme.test",
      issuer: "https://auth.acme.test",
    });
    expect(await json<ProjectBody>(await asAcme("PATCH", "/v1/project", { customDomain: "auth.acme.test:08443" }))).toMatchObject({
      customDomain: "auth.acme.test:8443",
      issuer: "https://auth.acme.test:8443",
    });
    expect((await discovery("auth.acme.test:8443")).issuer).toBe("https://auth.acme.test:8443");
  });

  test("a custom domain stored before it was canonical never takes over the instance's own host", async () => {
    const before = await jwks("tokens.example.test");
    // As an earlier version could store it: the public host with its default port.
    await t.ctx.store.updateProject(acme.id, (current) => ({ ...current, customDomain: "tokens.example.test:443" }));
    await t.ctx.projects.refresh();
    expect((await discovery("tokens.example.test")).issuer).toBe(PUBLIC);
    expect(await jwks("tokens.example.test")).toEqual(before);
    expect((await discovery("tokens.example.test:443")).issuer).toBe(PUBLIC);
  });

  test("a project created by another process is served after the next tick", async () => {
    expect((await discovery("beta.tokens.example.test")).issuer).toBe(PUBLIC);
    await createProject(t.ctx.store, { slug: "beta", name: "Beta", signingAlg: "RS256" }, t.ctx.config, t.clock.now());
    await t.ctx.keys.tick();
    expect((await discovery("beta.tokens.example.test")).issuer).toBe("https://beta.tokens.example.test");
    expect((await jwks("beta.tokens.example.test")).keys.map((k) => k.alg)).toEqual(["RS256", "RS256"]);
  });

  test("until a new project's keys are loaded, its hosts answer as the default project's, never with an error", async () => {
    const host = "gamma.tokens.example.test";
    const before = await jwks(PUBLIC.replace("https://", ""));
    const record = await createProject(t.ctx.store, { slug: "gamma", name: "Gamma" }, t.ctx.config, t.clock.now());
    // The moment between reading the projects and loading the new one's keys. Asked of the app
    // itself: the fetch handler would first catch up (the next test).
    await t.ctx.projects.refresh();
    expect(t.ctx.keys.has(record.id)).toBe(false);
    const ofApp = async (path: string) => (await t.app.handle(new Request(`http://${host}${path}`, { headers: { host } }))).json();
    expect(((await ofApp("/.well-known/openid-configuration")) as { issuer: string }).issuer).toBe(PUBLIC);
    expect(await ofApp("/.well-known/jwks")).toEqual(before);
    await t.ctx.keys.tick();
    expect(t.ctx.keys.has(record.id)).toBe(true);
    expect((await discovery(host)).issuer).toBe(`https://${host}`);
    expect((await jwks(host)).keys.map((k) => k.kid)).not.toEqual(before.keys.map((k) => k.kid));
  });

  test("a project created by another writer (the CLI) is served from the very next request, with no tick", async () => {
    const host = "delta.tokens.example.test";
    const before = await jwks(host);
    const record = await createProject(t.ctx.store, { slug: "delta", name: "Delta" }, t.ctx.config, t.clock.now());
    expect(t.ctx.keys.has(record.id)).toBe(false);
    expect((await discovery(host)).issuer).toBe(`https://${host}`);
    expect(t.ctx.keys.has(record.id)).toBe(true);
    expect((await jwks(host)).keys.map((k) => k.kid)).not.toEqual(before.keys.map((k) => k.kid));
  });

  test("a host resolves to one match object until its project or URL changes, so what is cached per host goes with the host", async () => {
    const directory = t.ctx.projects;
    const acmeMatch = directory.resolveHost(ACME_HOST);
    const defaultMatch = directory.resolveHost("nobody.example.test");
    expect(defaultMatch.project.id).toBe(t.ctx.projectId);
    // Every host of no project, and the public URL's, resolve to the one default match.
    expect(directory.resolveHost(null)).toBe(defaultMatch);
    expect(directory.resolveHost("tokens.example.test")).toBe(defaultMatch);
    // Another project's write leaves acme's match as it was.
    await t.api("PATCH", "/v1/project", { name: "renamed" });
    expect(directory.resolveHost(ACME_HOST)).toBe(acmeMatch);
    // Acme's own change makes a new one; a custom domain has its own, gone with the domain.
    await asAcme("PATCH", "/v1/project", { customDomain: "auth.acme.test" });
    const custom = directory.resolveHost("auth.acme.test");
    expect(custom).toMatchObject({ project: { id: acme.id }, url: "https://auth.acme.test" });
    expect(directory.resolveHost(ACME_HOST)).not.toBe(acmeMatch);
    await asAcme("PATCH", "/v1/project", { customDomain: "id.acme.test" });
    expect(directory.resolveHost("auth.acme.test").project.id).toBe(t.ctx.projectId);
    expect((await discovery("auth.acme.test")).issuer).toBe(PUBLIC);
    expect((await discovery("id.acme.test")).issuer).toBe("https://id.acme.test");
  });

  test("slugs are DNS labels, unique, not in the form of an id, and 'default' is reserved", async () => {
    // An xn-- label that is no valid IDNA name would make a host no URL takes: refused, nothing stored.
    for (const slug of ["default", "Acme", "-x", "a_b", "a".repeat(64), "xn--zz"]) {
      await expect(createProject(t.ctx.store, { slug, name: "x" }, t.ctx.config, t.clock.now())).rejects.toMatchObject({ code: "invalid_request" });
    }
    expect((await t.ctx.store.listProjects()).map((p) => p.slug)).not.toContain("xn--zz");
    // A slug in the form of a project id could name another project where a slug or an id is taken (--project).
    await expect(createProject(t.ctx.store, { slug: acme.id, name: "x" }, t.ctx.config, t.clock.now())).rejects.toMatchObject({
      code: "invalid_request",
      message: expect.stringContaining("form of a project id"),
    });
    await expect(createProject(t.ctx.store, { slug: "acme", name: "x" }, t.ctx.config, t.clock.now())).rejects.toMatchObject({ code: "conflict" });
    // A valid one is a project like any other, at its ASCII host.
    const idn = await createProject(t.ctx.store, { slug: "xn--bcher-kva", name: "Bücher" }, t.ctx.config, t.clock.now());
    expect(idn.slug).toBe("xn--bcher-kva");
  });
});

describe("a slug whose host is the public URL's", () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await buildTestApp({ publicUrl: "https://auth.example.test", env: { TOKENMINT_BASE_DOMAIN: "example.test:8443" } });
  });
  afterEach(() => t.close());

  test("is refused on any port, and the default project keeps its host and every unknown host", async () => {
    // auth.example.test is the default project's host: a project there would take its callers.
    await expect(createProject(t.ctx.store, { slug: "auth", name: "x" }, t.ctx.config, t.clock.now())).rejects.toMatchObject({
      code: "invalid_request",
      message: expect.stringContaining("auth.example.test"),
    });
    expect(await t.ctx.store.listProjects()).toHaveLength(1);
    const other = await createProject(t.ctx.store, { slug: "billing", name: "Billing" }, t.ctx.config, t.clock.now());
    await t.ctx.keys.tick();
    for (const host of ["auth.example.test", "unknown.example.test", "127.0.0.1:8080"]) {
      const discovery = await json<{ issuer: string }>(await t.request("GET", "/.well-known/openid-configuration", undefined, { host }));
      expect(discovery.issuer).toBe("https://auth.example.test");
    }
    const billing = await json<{ issuer: string }>(await t.request("GET", "/.well-known/openid-configuration", undefined, { host: "billing.example.test:8443" }));
    expect(billing.issuer).toBe(`https://${other.slug}.example.test:8443`);
  });

  test("settings that put a custom domain where a project's own host is stop start-up; a slug at a custom domain is refused", async () => {
    const dir = tempDir();
    try {
      const settings = { dataDir: dir.path, masterKey: t.masterKey, publicUrl: "https://id.tokens.test" };
      const before = await buildTestApp({ ...settings, env: { TOKENMINT_BASE_DOMAIN: "tokens.test" } });
      const beta = await createProject(before.ctx.store, { slug: "beta", name: "Beta", customDomain: "auth.example.test" }, before.ctx.config, before.clock.now());
      // Under another base domain, project "login" would be at login.example.test: a custom domain under it, no clash.
      await createProject(before.ctx.store, { slug: "gamma", name: "Gamma", customDomain: "sso.login.example.test" }, before.ctx.config, before.clock.now());
      // Under a base domain above the custom domain, project "auth" would be at beta's domain.
      const otherBase = { ...before.ctx.config, baseDomain: "example.test" };
      await expect(createProject(before.ctx.store, { slug: "auth", name: "Auth" }, otherBase, before.clock.now())).rejects.toMatchObject({
        code: "conflict",
        message: "Cannot create a project: its host auth.example.test is the custom domain of project 'beta'.",
      });
      expect((await before.ctx.store.listProjects()).map((p) => p.slug)).not.toContain("auth");
      // Data whose custom domains lie under the new base domain, but are no project's own host, serves.
      await before.close();
      const served = await buildTestApp({ ...settings, env: { TOKENMINT_BASE_DOMAIN: "example.test" } });
      expect(served.ctx.projects.resolveHost("auth.example.test").project.id).toBe(beta.id);
      // Project "auth", made under the former base domain, would be at beta's domain under this one.
      await createProject(served.ctx.store, { slug: "auth", name: "Auth" }, { ...served.ctx.config, baseDomain: "tokens.test" }, served.clock.now());
      await served.close();
      await expect(buildTestApp({ ...settings, env: { TOKENMINT_BASE_DOMAIN: "example.test" } })).rejects.toThrow(
        "project 'beta' has the custom domain auth.example.test, which is now the host of project 'auth'",
      );
      // Nor does a server whose public URL is a project's custom domain.
      await expect(buildTestApp({ ...settings, publicUrl: "https://auth.example.test", env: { TOKENMINT_BASE_DOMAIN: "tokens.test" } })).rejects.toThrow(
        "project 'beta' has the custom domain auth.example.test, which is now the public URL's host",
      );
      // With the settings it was set under, it serves as before.
      const again = await buildTestApp({ ...settings, env: { TOKENMINT_BASE_DOMAIN: "tokens.test" } });
      expect(again.ctx.projects.resolveHost("auth.example.test").project.id).toBe(beta.id);
      await again.close();
    } finally {
      dir.remove();
    }
  });

  test("one made before the public URL moved to its host stops start-up: it would take the default project's host", async () => {
    const dir = tempDir();
    try {
      const settings = { dataDir: dir.path, masterKey: t.masterKey, env: { TOKENMINT_BASE_DOMAIN: "example.test" } };
      const before = await buildTestApp({ ...settings, publicUrl: "https://auth.example.test" });
      await createProject(before.ctx.store, { slug: "id", name: "Id" }, before.ctx.config, before.clock.now());
      await before.close();
      // The public URL moves to id.example.test, the host project "id" has.
      await expect(buildTestApp({ ...settings, publicUrl: "https://id.example.test" })).rejects.toThrow("project 'id' would be at id.example.test, the public URL's host");
      // Where it was, it serves.
      const again = await buildTestApp({ ...settings, publicUrl: "https://auth.example.test" });
      expect(again.ctx.projects.resolveHost("id.example.test").project.slug).toBe("id");
      await again.close();
    } finally {
      dir.remove();
    }
  });
});
