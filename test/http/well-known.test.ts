/** CONTRACT §4: discovery document and JWKS — fields, caching, ETag, CORS, no private members. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodeJwt } from "jose";
import type { SigningAlg } from "../../src/config/schema.ts";
import { createProject } from "../../src/core/projects.ts";
import { AppError } from "../../src/errors.ts";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { json, mediaType } from "./support.ts";

interface Jwk {
  [member: string]: string;
}
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "k"];
const PUBLIC_MEMBERS: Record<SigningAlg, string[]> = {
  RS256: ["alg", "e", "kid", "kty", "n", "use"],
  ES256: ["alg", "crv", "kid", "kty", "use", "x", "y"],
  EdDSA: ["alg", "crv", "kid", "kty", "use", "x"],
};
const KTY: Record<SigningAlg, string> = { RS256: "RSA", ES256: "EC", EdDSA: "OKP" };

const maxAge = (res: Response) => Number(/(?:^|[\s,])max-age=(\d+)/.exec(res.headers.get("cache-control") ?? "")?.[1] ?? NaN);

describe("discovery document", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ publicUrl: "https://x.example.test/" });
  });
  afterAll(() => t.close());

  test("issuer is the configured public URL without a trailing slash; jwks_uri hangs off it", async () => {
    const res = await t.request("GET", "/.well-known/openid-configuration");
    expect(res.status).toBe(200);
    expect(mediaType(res)).toBe("application/json");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(maxAge(res)).toBeGreaterThan(0);
    const doc = await json<Record<string, unknown>>(res);
    expect(doc.issuer).toBe("https://x.example.test");
    expect(doc.jwks_uri).toBe("https://x.example.test/.well-known/jwks");
    // The keys' algorithm, and RS256, which OpenID Connect Discovery 1.0 §3 requires whatever the keys.
    expect(doc.id_token_signing_alg_values_supported).toEqual(["ES256", "RS256"]);
    expect(doc.response_types_supported).toBeArray();
    expect(doc.subject_types_supported).toBeArray();
  });

  test("names the token endpoint, its grant type and its client authentication methods", async () => {
    const doc = await json<Record<string, unknown>>(await t.request("GET", "/.well-known/openid-configuration"));
    expect(doc.token_endpoint).toBe("https://x.example.test/oauth/token");
    expect(doc.grant_types_supported).toEqual(["client_credentials"]);
    expect(doc.token_endpoint_auth_methods_supported).toEqual(["client_secret_basic", "client_secret_post", "private_key_jwt"]);
    // The algs of client assertions (private_key_jwt), not of the issuer's own signing keys.
    expect(doc.token_endpoint_auth_signing_alg_values_supported).toEqual(["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]);
  });

  test("names the introspection and revocation endpoints, with the token endpoint's authentication methods", async () => {
    const doc = await json<Record<string, unknown>>(await t.request("GET", "/.well-known/openid-configuration"));
    expect(doc.introspection_endpoint).toBe("https://x.example.test/oauth/introspect");
    expect(doc.revocation_endpoint).toBe("https://x.example.test/oauth/revoke");
    expect(doc.introspection_endpoint_auth_methods_supported).toEqual(doc.token_endpoint_auth_methods_supported);
    expect(doc.revocation_endpoint_auth_methods_supported).toEqual(doc.token_endpoint_auth_methods_supported);
    // They take private_key_jwt, so RFC 8414 §2 requires their assertion algs too.
    expect(doc.introspection_endpoint_auth_signing_alg_values_supported).toEqual(doc.token_endpoint_auth_signing_alg_values_supported);
    expect(doc.revocation_endpoint_auth_signing_alg_values_supported).toEqual(doc.token_endpoint_auth_signing_alg_values_supported);
  });

  test("/.well-known/oauth-authorization-server (RFC 8414) serves the same body and headers", async () => {
    const oidc = await t.request("GET", "/.well-known/openid-configuration");
    const oauth = await t.request("GET", "/.well-known/oauth-authorization-server");
    expect(oauth.status).toBe(200);
    expect(Object.fromEntries(oauth.headers)).toEqual(Object.fromEntries(oidc.headers));
    expect(await oauth.text()).toBe(await oidc.text());
  });

  test("discovery requests write no log line", async () => {
    const logLines: string[] = [];
    const quiet = await buildTestApp({ logLines });
    try {
      for (const path of ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"]) {
        expect((await quiet.request("GET", path)).status).toBe(200);
      }
      await new Promise((resolve) => setImmediate(resolve));
      expect(logLines.filter((line) => line.includes('"request"'))).toEqual([]);
    } finally {
      await quiet.close();
    }
  });

  test("forged Host and X-Forwarded-* headers change nothing, neither in discovery nor in tokens", async () => {
    const plain = await (await t.request("GET", "/.well-known/openid-configuration")).text();
    const forged = { host: "evil.example.test", "x-forwarded-host": "evil.example.test", "x-forwarded-proto": "http", forwarded: "host=evil.example.test" };
    const viaHeaders = await t.request("GET", "/.well-known/openid-configuration", undefined, forged);
    expect(await viaHeaders.text()).toBe(plain);
    const viaUrl = await t.app.handle(new Request("http://evil.example.test/.well-known/openid-configuration", { headers: forged }));
    expect(await viaUrl.text()).toBe(plain);

    const { providerId, clientId } = await createProviderAndClient(t);
    const res = await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, { forceDefaultDomain: true }, forged);
    expect(decodeJwt((await json<{ accessToken: string }>(res)).accessToken).iss).toBe("https://x.example.test");
  });
});

for (const alg of ["RS256", "ES256", "EdDSA"] as const) {
  describe(`${alg} JWKS`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp({ alg });
    });
    afterAll(() => t.close());

    test("is {keys} with kty, kid, use 'sig', alg and only the public members", async () => {
      const res = await t.request("GET", "/.well-known/jwks");
      expect(res.status).toBe(200);
      const body = await json<{ keys: Jwk[] }>(res);
      expect(Object.keys(body)).toEqual(["keys"]);
      expect(body.keys.length).toBe(2);
      for (const key of body.keys) {
        expect(Object.keys(key).sort()).toEqual(PUBLIC_MEMBERS[alg]);
        expect(key).toMatchObject({ kty: KTY[alg], use: "sig", alg });
        expect(key.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
        for (const member of PRIVATE_MEMBERS) expect(key).not.toHaveProperty(member);
      }
    });
  });
}

describe("an issuer with a path (a proxy's prefix in the public URL)", () => {
  test("its RFC 8414 metadata is also at the well-known path with the issuer's path after it; not for a host of another issuer", async () => {
    const t = await buildTestApp({ publicUrl: "https://x.example.test/auth/" });
    try {
      const record = await createProject(t.ctx.store, { slug: "acme", name: "Acme" }, t.ctx.config, t.clock.now());
      await t.ctx.keys.tick();
      const inserted = await t.request("GET", "/.well-known/oauth-authorization-server/auth");
      const plain = await t.request("GET", "/.well-known/oauth-authorization-server");
      expect(inserted.status).toBe(200);
      expect(Object.fromEntries(inserted.headers)).toEqual(Object.fromEntries(plain.headers));
      const text = await inserted.text();
      expect(text).toBe(await plain.text());
      expect((JSON.parse(text) as { issuer: string }).issuer).toBe("https://x.example.test/auth");
      // A project's own host has an issuer without that path.
      const other = await t.request("GET", "/.well-known/oauth-authorization-server/auth", undefined, { host: `${record.slug}.x.example.test` });
      expect({ status: other.status, body: await other.json() }).toEqual({ status: 404, body: { code: "not_found", message: expect.any(String) } });
      // Another path after the well-known one is no document.
      expect((await t.request("GET", "/.well-known/oauth-authorization-server/other")).status).toBe(404);
    } finally {
      await t.close();
    }
  });

  test("without a path in the public URL there is no such location", async () => {
    const t = await buildTestApp({ publicUrl: "https://x.example.test" });
    try {
      expect((await t.request("GET", "/.well-known/oauth-authorization-server/auth")).status).toBe(404);
    } finally {
      await t.close();
    }
  });
});

describe("JWKS caching and lifecycle", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(() => t.close());

  const jwks = (headers: Record<string, string> = {}, path = "/.well-known/jwks") => t.request("GET", path, undefined, headers);
  const kids = async () => (await json<{ keys: Jwk[] }>(await jwks())).keys.map((k) => k.kid);
  const keyList = async () => (await json<{ items: { kid: string; state: string }[] }>(await t.api("GET", "/v1/keys"))).items;

  test("a failure of discovery in the direct lane is answered as every error is: status and {code, message}", async () => {
    const ring = t.ctx.keys.ring.bind(t.ctx.keys);
    t.ctx.keys.ring = () => {
      throw new AppError("unavailable", "Signing keys are not loaded yet.");
    };
    try {
      for (const path of ["/.well-known/jwks", "/.well-known/openid-configuration"]) {
        const res = await jwks({}, path);
        expect(res.status).toBe(503);
        expect(await res.json()).toEqual({ code: "unavailable", message: "Signing keys are not loaded yet." });
      }
    } finally {
      t.ctx.keys.ring = ring;
    }
    expect((await jwks()).status).toBe(200);
  });

  test("carries Cache-Control max-age, an ETag, CORS and a JWK set media type", async () => {
    const res = await jwks();
    expect(maxAge(res)).toBeGreaterThan(0);
    expect(maxAge(res)).toBe(t.ctx.keys.jwksMaxAge(t.ctx.projectId));
    expect(res.headers.get("etag")).toMatch(/^"[^"]+"$/);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    // Browser code may read the ETag, to revalidate.
    expect(res.headers.get("access-control-expose-headers")).toBe("ETag");
    expect(["application/json", "application/jwk-set+json"]).toContain(mediaType(res) ?? "");
  });

  test("a CORS preflight of any discovery path is a 204 that allows GET and HEAD with If-None-Match; other methods list HEAD in Allow", async () => {
    const preflight = { origin: "https://app.example", "access-control-request-method": "GET", "access-control-request-headers": "if-none-match" };
    for (const path of ["/.well-known/jwks", "/.well-known/jwks.json", "/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"]) {
      const res = await t.request("OPTIONS", path, undefined, preflight);
      expect({ path, status: res.status, body: await res.text() }).toEqual({ path, status: 204, body: "" });
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("access-control-allow-methods")).toBe("GET, HEAD");
      expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toBe("if-none-match");
      const post = await t.request("POST", path);
      expect(post.status).toBe(405);
      expect(post.headers.get("allow")).toBe("GET, OPTIONS, HEAD");
    }
    // The management API is not for browsers: no preflight there.
    expect((await t.request("OPTIONS", "/v1/providers")).status).toBe(401);
  });

  test("a preflight with a body ignores it, as a GET does: whatever its type, coding or size", async () => {
    const bodies: [string, Record<string, string>][] = [
      ["hello", { "content-type": "text/plain" }],
      ["x", { "content-type": "application/json", "content-encoding": "gzip" }],
      ["{".repeat(70_000), { "content-type": "application/json" }],
    ];
    for (const [body, headers] of bodies) {
      for (const method of ["OPTIONS", "GET"]) {
        const res = await t.request(method, "/.well-known/jwks", body, headers);
        expect({ method, type: headers["content-type"], status: res.status }).toEqual({ method, type: headers["content-type"], status: method === "GET" ? 200 : 204 });
      }
    }
  });

  test("304 with no body on a matching If-None-Match: exact, in a list, weak, or *", async () => {
    const etag = (await jwks()).headers.get("etag") ?? "";
    for (const header of [etag, `"other", ${etag}`, `W/${etag}`, `"a",W/${etag} , "b"`, "*"]) {
      const res = await jwks({ "if-none-match": header });
      expect({ header, status: res.status }).toEqual({ header, status: 304 });
      expect(await res.text()).toBe("");
      expect(res.headers.get("etag")).toBe(etag);
      expect(maxAge(res)).toBeGreaterThan(0);
    }
  });

  test("200 on a non-matching If-None-Match", async () => {
    const res = await jwks({ "if-none-match": '"not-the-etag"' });
    expect(res.status).toBe(200);
    expect((await json<{ keys: unknown[] }>(res)).keys.length).toBeGreaterThan(0);
  });

  test("the .json alias serves the same body and ETag", async () => {
    const a = await jwks();
    const b = await jwks({}, "/.well-known/jwks.json");
    expect(b.status).toBe(200);
    expect(b.headers.get("etag")).toBe(a.headers.get("etag"));
    expect(await b.text()).toBe(await a.text());
  });

  test("the next key is published in the JWKS before it signs", async () => {
    const list = await keyList();
    const next = list.find((k) => k.state === "next");
    const current = list.find((k) => k.state === "current");
    expect(next).toBeDefined();
    expect(current).toBeDefined();
    expect((await kids()).sort()).toEqual([current?.kid ?? "", next?.kid ?? ""].sort());
  });

  test("the ETag changes after a rotation, and the retired key stays published", async () => {
    const before = await jwks();
    const oldEtag = before.headers.get("etag");
    const oldCurrent = (await keyList()).find((k) => k.state === "current")?.kid;
    t.clock.advance(t.ctx.keys.jwksMaxAge(t.ctx.projectId) + 1);
    await t.ctx.keys.rotate(t.ctx.projectId);
    const after = await jwks({ "if-none-match": oldEtag ?? "" });
    expect(after.status).toBe(200);
    expect(after.headers.get("etag")).not.toBe(oldEtag);
    expect((await json<{ keys: Jwk[] }>(after)).keys.map((k) => k.kid)).toContain(oldCurrent ?? "");
    expect((await kids()).length).toBe(3);
  });

  test("the ETag changes after a revocation and the kid is gone at once", async () => {
    const oldEtag = (await jwks()).headers.get("etag");
    const retired = (await keyList()).find((k) => k.state === "retired")?.kid ?? "";
    await t.ctx.keys.revoke(t.ctx.projectId, retired);
    const after = await jwks({ "if-none-match": oldEtag ?? "" });
    expect(after.status).toBe(200);
    expect(after.headers.get("etag")).not.toBe(oldEtag);
    expect(await kids()).not.toContain(retired);
  });
});

describe("no private key member in any answer of a full workload", () => {
  for (const alg of ["RS256", "ES256", "EdDSA"] as const) {
    test(alg, async () => {
      const t = await buildTestApp({ alg });
      try {
        const texts: string[] = [];
        const record = async (res: Response | Promise<Response>) => {
          const r = await res;
          texts.push([...r.headers].map(([k, v]) => `${k}: ${v}`).join("\n"), await r.text());
          return r;
        };
        const { providerId, clientId } = await createProviderAndClient(t);
        const base = `/v1/providers/${providerId}`;
        await record(t.api("GET", "/v1/providers"));
        await record(t.api("GET", base));
        await record(t.api("GET", `${base}/clients`));
        await record(t.api("GET", `${base}/clients/${clientId}`));
        const token = await record(t.api("POST", `${base}/clients/${clientId}/tokens`, { useJwtType: true }));
        expect(token.status).toBe(201);
        for (const path of ["/.well-known/openid-configuration", "/.well-known/jwks", "/.well-known/jwks.json", "/openapi.json", "/healthz", "/readyz"]) {
          await record(t.request("GET", path));
        }
        await record(t.api("GET", "/v1/keys"));
        await record(t.api("POST", "/v1/keys/rotate"));
        t.clock.advance(t.ctx.keys.jwksMaxAge(t.ctx.projectId) + 1);
        await record(t.api("POST", "/v1/keys/rotate"));
        const kid = (await json<{ items: { kid: string }[] }>(await t.api("GET", "/v1/keys"))).items[0]?.kid;
        await record(t.api("POST", `/v1/keys/${kid}/revoke`));
        await record(t.request("GET", "/.well-known/jwks"));
        await record(t.api("GET", "/v1/nope"));
        // The token's own segments too.
        for (const text of [...texts]) {
          for (const m of text.matchAll(/eyJ[\w-]*\.eyJ[\w-]*/g)) {
            for (const part of m[0].split(".")) texts.push(Buffer.from(part, "base64url").toString("utf8"));
          }
        }
        const all = texts.join("\n");
        expect(all).toContain('"kty"');
        for (const member of PRIVATE_MEMBERS) expect(all).not.toMatch(new RegExp(`"${member}"\\s*:`));
        expect(all).not.toContain("sealedPrivateJwk");
        expect(all).not.toContain("PRIVATE KEY");
      } finally {
        await t.close();
      }
    });
  }
});
