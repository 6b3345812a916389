/** CONTRACT §3: every error row that applies, with the exact `{code, message}` body. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { createApiKey, revokeApiKey } from "../../src/core/api-keys.ts";
import { OAUTH_ERROR_TABLE } from "../../src/core/oauth/errors.ts";
import { ERROR_TABLE } from "../../src/errors.ts";
import { StoreError } from "../../src/store/store.ts";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { basic, createSecret, tokenRequest } from "../oauth/support.ts";
import { expectError } from "./support.ts";

const MAX_BODY = 64 * 1024;

describe("errors", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(() => t.close());

  const withKey = (key: string, method = "GET", path = "/v1/providers") => t.request(method, path, undefined, { authorization: `Bearer ${key}` });

  test("400 for bad JSON", async () => {
    await expectError(await t.api("POST", "/v1/providers", "{\"name\":", { "content-type": "application/json" }), 400, "invalid_request", "JSON");
  });

  describe("400 for a body nested too deeply, before it is parsed", () => {
    const nested = (depth: number, open = "[", close = "]") => `{"name":"a","x":${open.repeat(depth)}${close.repeat(depth)}}`;

    test("on a management write and on token issuance, answered at once and changing nothing", async () => {
      const { providerId, clientId } = await createProviderAndClient(t);
      for (const [open, close, depth] of [["[", "]", 30_000], ['{"a":', "}", 10_000]] as const) {
        const body = nested(depth, open, close);
        expect(body.length).toBeLessThan(MAX_BODY);
        await expectError(await t.api("POST", "/v1/providers", body, { "content-type": "application/json" }), 400, "invalid_request", "levels deep");
        const tokens = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
        await expectError(await t.api("POST", tokens, body, { "content-type": "application/json" }), 400, "invalid_request", "levels deep");
      }
      const list = (await (await t.api("GET", "/v1/providers?limit=100")).json()) as { items: { name: string }[] };
      expect(list.items.some((p) => p.name === "a")).toBe(false);
    });

    test("32 levels are parsed (and then validated as usual); brackets inside strings do not count", async () => {
      // Depth 32 in all: the body object and 31 arrays; the field is unknown to the schema.
      await expectError(await t.api("POST", "/v1/providers", nested(31), { "content-type": "application/json" }), 400, "invalid_request", "Unknown field 'x'");
      await expectError(await t.api("POST", "/v1/providers", nested(32), { "content-type": "application/json" }), 400, "invalid_request", "levels deep");
      const bracketed = "[{\\\"".repeat(100);
      const res = await t.api("POST", "/v1/providers", `{"name":"brackets","description":"${bracketed}"}`, { "content-type": "application/json" });
      expect(res.status).toBe(201);
      expect(((await res.json()) as { description: string }).description).toBe('[{"'.repeat(100));
    });
  });

  test("400 for a string that is not valid Unicode (an unpaired surrogate escape); a paired one is kept", async () => {
    for (const name of ["\\ud800", "a\\udc00b", "\\uDBFF"]) {
      await expectError(await t.api("POST", "/v1/providers", `{"name":"${name}"}`, { "content-type": "application/json" }), 400, "invalid_request", "Unicode");
    }
    await expectError(await t.api("POST", "/v1/providers", '{"name":"ok","\\ud800":1}', { "content-type": "application/json" }), 400, "invalid_request", "Unicode");
    const res = await t.api("POST", "/v1/providers", '{"name":"smile \\ud83d\\ude00"}', { "content-type": "application/json" });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { name: string }).name).toBe("smile \u{1F600}");
  });

  test("actions without input (rotate, revoke, revoke-tokens) refuse a body with fields; none or {} is fine", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const revokeTokens = `/v1/providers/${providerId}/clients/${clientId}/revoke-tokens`;
    for (const body of ['{"force":true}', "[]", '"x"', "1"]) {
      await expectError(await t.api("POST", revokeTokens, body, { "content-type": "application/json" }), 400, "invalid_request");
      await expectError(await t.api("POST", "/v1/keys/rotate", body, { "content-type": "application/json" }), 400, "invalid_request");
      await expectError(await t.api("POST", "/v1/keys/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/revoke", body, { "content-type": "application/json" }), 400, "invalid_request");
    }
    expect((await t.api("POST", revokeTokens)).status).toBe(200);
    expect((await t.api("POST", revokeTokens, {})).status).toBe(200);
  });

  test("under /v1/ the API key comes first: without one, 401 for any path and method; with one, 404 and 405", async () => {
    for (const [method, path, withKey] of [["POST", "/v1/nonexistent", 404], ["PUT", "/v1/providers", 405], ["GET", "/v1/providers", 200]] as const) {
      expect({ method, path, status: (await t.request(method, path)).status }).toEqual({ method, path, status: 401 });
      expect({ method, path, status: (await t.api(method, path)).status }).toEqual({ method, path, status: withKey });
    }
  });

  test("every DELETE refuses a body with fields and deletes nothing; none or {} is fine", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const { id: secretId } = await createSecret(t, providerId, clientId);
    const client = `/v1/providers/${providerId}/clients/${clientId}`;
    const paths = [`${client}/secrets/${secretId}`, `${client}/jwks`, client, `/v1/providers/${providerId}`];
    for (const path of paths) {
      for (const body of ['{"force":true}', '{"x":null}', "[]", "1"]) {
        await expectError(await t.api("DELETE", path, body, { "content-type": "application/json" }), 400, "invalid_request");
      }
    }
    expect((await t.api("GET", `${client}/secrets`)).status).toBe(200);
    expect(((await (await t.api("GET", `${client}/secrets`)).json()) as { items: unknown[] }).items).toHaveLength(1);
    expect((await t.api("DELETE", `${client}/secrets/${secretId}`, {})).status).toBe(204);
    expect((await t.api("DELETE", client)).status).toBe(204);
    expect((await t.api("DELETE", `/v1/providers/${providerId}`, {})).status).toBe(204);
  });

  test("a UUID in a path is case-insensitive: the uppercase form names the same record", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const upper = (id: string) => id.toUpperCase();
    const got = await t.api("GET", `/v1/providers/${upper(providerId)}/clients/${upper(clientId)}`);
    expect(got.status).toBe(200);
    expect(((await got.json()) as { id: string }).id).toBe(clientId);
    expect((await t.api("POST", `/v1/providers/${upper(providerId)}/clients/${upper(clientId)}/tokens`)).status).toBe(201);
    expect((await t.api("PATCH", `/v1/providers/${upper(providerId)}`, { name: "renamed" })).status).toBe(200);
    expect(((await (await t.api("GET", `/v1/providers/${providerId}`)).json()) as { name: string }).name).toBe("renamed");
    // And as an OAuth client_id.
    const { secret } = await createSecret(t, providerId, clientId);
    const token = await tokenRequest(t, { grant_type: "client_credentials" }, { authorization: basic(upper(clientId), secret) });
    expect(token.status).toBe(200);
    expect(decodeJwt(((await token.json()) as { access_token: string }).access_token).client_id).toBe(clientId);
    // The same id in two cases, in the header and the body, names one client.
    const both = await tokenRequest(t, { grant_type: "client_credentials", client_id: clientId }, { authorization: basic(upper(clientId), secret) });
    expect(both.status).toBe(200);
  });

  test("a management route refuses query parameters it does not know; discovery ignores them", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const tokens = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
    await expectError(await t.api("POST", `${tokens}?expiresIn=5`), 400, "invalid_request", "Unknown query parameter 'expiresIn'");
    await expectError(await t.api("GET", `/v1/providers/${providerId}?verbose=1`), 400, "invalid_request", "Unknown query parameter 'verbose'");
    await expectError(await t.api("POST", `/v1/keys/rotate?force=true`), 400, "invalid_request", "Unknown query parameter 'force'");
    // Named as sent: an empty name, and names with the characters a JSON pointer escapes.
    await expectError(await t.api("GET", "/v1/providers?=1"), 400, "invalid_request", "Unknown query parameter ''");
    await expectError(await t.api("POST", "/v1/providers", { name: "x", "": 1 }), 400, "invalid_request", "Unknown field ''");
    await expectError(await t.api("POST", "/v1/providers", { name: "x", "a/b": 1 }), 400, "invalid_request", "Unknown field 'a/b'");
    await expectError(await t.api("POST", "/v1/providers", { name: "x", "a~b": 1 }), 400, "invalid_request", "Unknown field 'a~b'");
    // Known ones still work, and an empty query is no parameter.
    expect((await t.api("GET", "/v1/providers?limit=1")).status).toBe(200);
    expect((await t.api("POST", `${tokens}?`)).status).toBe(201);
    expect((await t.request("GET", "/.well-known/jwks?v=2")).status).toBe(200);
  });

  describe("401", () => {
    const expect401 = async (res: Response, expired: boolean) => {
      const challenge = res.headers.get("www-authenticate");
      const body = await expectError(res, 401, "unauthorized");
      expect(challenge).toStartWith("Bearer");
      if (expired) expect(body.message.toLowerCase()).toContain("expired");
      else expect(body.message.toLowerCase()).not.toContain("expired");
    };

    test("missing Authorization header", async () => {
      await expect401(await t.request("GET", "/v1/providers"), false);
      await expect401(await t.request("GET", "/v1/providers", undefined, { authorization: "" }), false);
    });

    for (const header of ["Basic x", "Bearer", "Bearer ", "Token abc", "Bearer a b"]) {
      test(`malformed header ${JSON.stringify(header)}`, async () => {
        await expect401(await t.request("GET", "/v1/providers", undefined, { authorization: header }), false);
      });
    }

    test("unknown key", async () => {
      await expect401(await withKey("tm_this-key-was-never-issued-by-the-service-0000"), false);
      await expect401(await withKey(`${t.apiKey}x`), false);
    });

    test("revoked key", async () => {
      const { record, secret } = await createApiKey(t.ctx.store, t.ctx.projectId, "to-revoke", t.clock.now());
      expect((await withKey(secret)).status).toBe(200);
      await revokeApiKey(t.ctx.store, t.ctx.projectId, record.id, t.clock.now());
      await expect401(await withKey(secret), false);
    });

    test("expired key, with a message that says so", async () => {
      const { secret } = await createApiKey(t.ctx.store, t.ctx.projectId, "short-lived", t.clock.now(), 60);
      expect((await withKey(secret)).status).toBe(200);
      t.clock.advance(60);
      await expect401(await withKey(secret), true);
      expect((await t.api("GET", "/v1/providers")).status).toBe(200);
    });

    test("authentication comes before the body is read or validated", async () => {
      await expect401(await t.request("POST", "/v1/providers", "{not json", { "content-type": "application/json" }), false);
      await expect401(await t.request("POST", "/v1/providers", { bogus: 1 }), false);
      await expect401(await t.request("POST", "/v1/providers", "x".repeat(MAX_BODY + 1), { "content-type": "text/plain" }), false);
      await expect401(await t.request("GET", "/v1/providers/not-a-uuid"), false);
    });
  });

  test("404 for an unknown route, with a JSON body", async () => {
    await expectError(await t.request("GET", "/nope"), 404, "not_found");
    await expectError(await t.api("GET", "/v1/nope"), 404, "not_found");
    await expectError(await t.api("POST", "/v1/providers/x/y/z/w"), 404, "not_found");
  });

  test("405 with an Allow header for a known path and another method", async () => {
    const put = await t.api("PUT", "/v1/providers", { name: "a" });
    const allowPut = put.headers.get("allow") ?? "";
    await expectError(put, 405, "method_not_allowed");
    expect(allowPut.split(",").map((m) => m.trim()).sort()).toEqual(["GET", "HEAD", "POST"]);
    const del = await t.api("DELETE", "/v1/keys");
    const allowDel = del.headers.get("allow") ?? "";
    await expectError(del, 405, "method_not_allowed");
    expect(allowDel.split(",").map((m) => m.trim())).toEqual(["GET", "HEAD"]);
  });

  test("409 when the operation clashes with the current state", async () => {
    const { providerId } = await createProviderAndClient(t);
    await expectError(await t.api("DELETE", `/v1/providers/${providerId}`), 409, "conflict");
  });

  describe("413", () => {
    const oversized = JSON.stringify({ name: "a", description: "x".repeat(MAX_BODY) });

    test("with an honest Content-Length", async () => {
      const length = String(new TextEncoder().encode(oversized).byteLength);
      await expectError(await t.api("POST", "/v1/providers", oversized, { "content-type": "application/json", "content-length": length }), 413, "payload_too_large");
    });

    test("without a Content-Length (streamed body)", async () => {
      const bytes = new TextEncoder().encode(oversized);
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < bytes.byteLength; i += 8192) controller.enqueue(bytes.subarray(i, i + 8192));
          controller.close();
        },
      });
      const request = new Request("http://localhost/v1/providers", {
        method: "POST",
        body,
        headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" },
      });
      expect(request.headers.get("content-length")).toBeNull();
      await expectError(await t.app.handle(request), 413, "payload_too_large");
    });

    test("a streamed body that never ends is read no further than the limit and one piece, through the app and the direct lane", async () => {
      const { providerId, clientId } = await createProviderAndClient(t);
      const piece = new Uint8Array(8192).fill(0x20);
      for (const path of ["/v1/providers", `/v1/providers/${providerId}/clients/${clientId}/tokens`]) {
        let pulled = 0;
        let cancelled = false;
        const body = new ReadableStream<Uint8Array>({
          pull(controller) {
            pulled += piece.byteLength;
            controller.enqueue(piece);
          },
          cancel() {
            cancelled = true;
          },
        });
        const request = new Request(`http://localhost${path}`, {
          method: "POST",
          body,
          headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" },
        });
        await expectError(await t.fetch(request), 413, "payload_too_large", `larger than ${MAX_BODY} bytes`);
        expect({ path, cancelled }).toEqual({ path, cancelled: true });
        // The stream may pull a piece or two ahead of what is read.
        expect(pulled).toBeLessThanOrEqual(MAX_BODY + 3 * piece.byteLength);
      }
    });

    test("a body of exactly the limit is read (and then validated)", async () => {
      const filler = MAX_BODY - JSON.stringify({ name: "a", description: "" }).length;
      const exact = JSON.stringify({ name: "a", description: "x".repeat(filler) });
      expect(exact.length).toBe(MAX_BODY);
      await expectError(await t.api("POST", "/v1/providers", exact, { "content-type": "application/json" }), 400, "invalid_request", "description");
    });
  });

  describe("415", () => {
    test("a JSON body sent as text/plain", async () => {
      await expectError(await t.api("POST", "/v1/providers", JSON.stringify({ name: "a" }), { "content-type": "text/plain" }), 415, "unsupported_media_type");
    });

    test("a non-empty body without any content type", async () => {
      const request = new Request("http://localhost/v1/providers", {
        method: "POST",
        body: new TextEncoder().encode(JSON.stringify({ name: "a" })),
        headers: { authorization: `Bearer ${t.apiKey}` },
      });
      expect(request.headers.get("content-type")).toBeNull();
      await expectError(await t.app.handle(request), 415, "unsupported_media_type");
    });

    test("a body with a content coding (gzip, br): refused, and nothing written; identity is no coding", async () => {
      const before = (await t.ctx.store.listProviders(t.ctx.projectId, { limit: 100 })).items.length;
      const gzipped = Bun.gzipSync(new TextEncoder().encode(JSON.stringify({ name: "zipped" })));
      const zipped = new Request("http://localhost/v1/providers", {
        method: "POST",
        body: gzipped,
        headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json", "content-encoding": "gzip" },
      });
      await expectError(await t.fetch(zipped), 415, "unsupported_media_type", "Content-Encoding");
      // A plain body said to be encoded is refused too, not read as if it were plain.
      await expectError(await t.api("POST", "/v1/providers", { name: "said br" }, { "content-encoding": "br" }), 415, "unsupported_media_type");
      expect((await t.ctx.store.listProviders(t.ctx.projectId, { limit: 100 })).items.length).toBe(before);
      expect((await t.api("POST", "/v1/providers", { name: "plain" }, { "content-encoding": "identity" })).status).toBe(201);
    });

    test("application/json with a charset, and +json types, are accepted", async () => {
      expect((await t.api("POST", "/v1/providers", JSON.stringify({ name: "a" }), { "content-type": "application/json; charset=utf-8" })).status).toBe(201);
      expect((await t.api("POST", "/v1/providers", JSON.stringify({ name: "a" }), { "content-type": "application/merge-patch+json" })).status).toBe(201);
    });
  });

  test("500 internal_error with the generic message and no detail for an unexpected fault", async () => {
    const { providerId } = await createProviderAndClient(t);
    const original = t.ctx.store.getProvider;
    t.ctx.store.getProvider = () => Promise.reject(new Error("lmdb exploded at /secret/path"));
    try {
      const res = await t.api("GET", `/v1/providers/${providerId}`);
      const text = await res.clone().text();
      const body = await expectError(res, 500, "internal_error");
      expect(body.message).toBe(ERROR_TABLE.internal_error.message);
      for (const leak of ["exploded", "/secret/path", "stack", "    at ", "Error:"]) expect(text).not.toContain(leak);
    } finally {
      t.ctx.store.getProvider = original;
    }
    expect((await t.api("GET", `/v1/providers/${providerId}`)).status).toBe(200);
  });

  test("503 unavailable while the service drains", async () => {
    t.ctx.draining = true;
    try {
      const res = await t.api("GET", "/v1/providers");
      expect(res.headers.get("retry-after")).not.toBeNull();
      await expectError(res, 503, "unavailable");
      await expectError(await t.api("POST", "/v1/providers", { name: "a" }), 503, "unavailable");
      // Discovery and JWKS, answered by the direct lane otherwise, drain the same way.
      await expectError(await t.request("GET", "/.well-known/jwks"), 503, "unavailable");
      await expectError(await t.request("GET", "/.well-known/openid-configuration"), 503, "unavailable");
    } finally {
      t.ctx.draining = false;
    }
    expect((await t.api("GET", "/v1/providers")).status).toBe(200);
    expect((await t.request("GET", "/.well-known/jwks")).status).toBe(200);
  });
});

describe("docs/errors.md", () => {
  /** The rows of each table of the file, in order (a table is a run of lines starting with "|"). */
  const tables = (): string[][][] => {
    const text = readFileSync(join(import.meta.dir, "..", "..", "docs", "errors.md"), "utf8");
    const found: string[][][] = [];
    let current: string[][] | undefined;
    for (const line of text.split("\n")) {
      if (!line.startsWith("|")) {
        current = undefined;
        continue;
      }
      if (current === undefined) found.push((current = []));
      current.push(line.split("|").slice(1, -1).map((cell) => cell.trim()));
    }
    return found;
  };
  const entries = (rows: string[][]) =>
    rows.slice(2).map(([status, code, meaning]) => ({ status: Number(status), code: code?.replaceAll("`", ""), meaningGiven: (meaning ?? "").length > 0 }));

  test("lists exactly the codes and statuses of ERROR_TABLE, in order", () => {
    const rows = tables()[0] ?? [];
    expect(rows[0]).toEqual(["status", "code", "meaning"]);
    expect(entries(rows)).toEqual(Object.entries(ERROR_TABLE).map(([code, { status }]) => ({ status, code, meaningGiven: true })));
  });

  test("lists exactly the errors and statuses of OAUTH_ERROR_TABLE, in order, in its second table", () => {
    const all = tables();
    expect(all).toHaveLength(2);
    const rows = all[1] ?? [];
    expect(rows[0]).toEqual(["status", "error", "meaning"]);
    expect(entries(rows)).toEqual(Object.entries(OAUTH_ERROR_TABLE).map(([code, { status }]) => ({ status, code, meaningGiven: true })));
  });
});

describe("a store that cannot write", () => {
  test("503 unavailable with the generic message; the log line names the store's reason", async () => {
    const logLines: string[] = [];
    const t = await buildTestApp({ logLines });
    const original = t.ctx.store.createProvider;
    t.ctx.store.createProvider = () => Promise.reject(new StoreError("unavailable", "cannot write /data/tokenmint.mdb: No space left on device"));
    try {
      const res = await t.api("POST", "/v1/providers", { name: "a" });
      const text = await res.clone().text();
      const body = await expectError(res, 503, "unavailable");
      expect(body.message).toBe(ERROR_TABLE.unavailable.message);
      for (const leak of ["/data", "No space", "StoreError"]) expect(text).not.toContain(leak);
      const failed = logLines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === "request failed");
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ level: "error", method: "POST", route: "/v1/providers", status: 503, error: "StoreError" });
      expect(String(failed[0]?.stack)).toStartWith("StoreError: cannot write /data/tokenmint.mdb: No space left on device\n");
    } finally {
      t.ctx.store.createProvider = original;
      await t.close();
    }
  });
});

describe("a stored record that breaks its response schema", () => {
  test("500; the log line says where it breaks the schema, never the record's values", async () => {
    const logLines: string[] = [];
    const t = await buildTestApp({ logLines });
    try {
      const { providerId, clientId } = await createProviderAndClient(t, "https://zqx-audience.example.test");
      // Data changed outside the service: a name that is not a string.
      await t.ctx.store.updateClient(t.ctx.projectId, providerId, clientId, (c) => ({ ...c, name: { secret: "ZQX-NAME" } as unknown as string }));
      const res = await t.api("GET", `/v1/providers/${providerId}/clients/${clientId}`);
      await expectError(res, 500, "internal_error");
      const failed = logLines.filter((line) => line.includes('"request failed"'));
      expect(failed).toHaveLength(1);
      for (const leak of ["ZQX", "zqx-audience", providerId, clientId]) expect(failed[0]).not.toContain(leak);
      const stack = String((JSON.parse(failed[0] as string) as { stack: string }).stack);
      expect(stack).toStartWith("ValidationError: the response does not match its schema at '/name'\n");
      expect(stack).toMatch(/\n\s+at /);
    } finally {
      await t.close();
    }
  });
});

describe("while the service drains", () => {
  test("each 503 closes its connection, and none is logged as a failure", async () => {
    const logLines: string[] = [];
    const t = await buildTestApp({ logLines });
    try {
      t.ctx.draining = true;
      for (const res of [await t.api("GET", "/v1/providers"), await t.request("GET", "/.well-known/jwks")]) {
        expect(res.status).toBe(503);
        expect(res.headers.get("connection")).toBe("close");
      }
      expect(logLines.filter((line) => line.includes('"level":"error"'))).toEqual([]);
    } finally {
      t.ctx.draining = false;
      await t.close();
    }
  });
});
