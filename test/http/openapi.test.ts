/** GET /openapi.json: an OpenAPI 3.1 document that covers the whole route table. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { routeTable } from "../../src/app.ts";
import { buildTestApp, type TestApp } from "../helpers/app.ts";
import { json, mediaType } from "./support.ts";

interface ResponseDoc {
  description: string;
  headers?: Record<string, { description: string; schema: unknown }>;
  content?: Record<string, { schema: Record<string, unknown> }>;
}
interface Operation {
  operationId?: string;
  summary?: string;
  parameters?: { name: string; in: string; required: boolean; schema: unknown }[];
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> };
  responses: Record<string, ResponseDoc>;
  security?: unknown[];
}
/** The servers a path item names for its operations (OpenAPI 3.1 §4.8.9), or undefined. */
const pathServers = (item: Record<string, unknown>) => item.servers as { url: string }[] | undefined;

interface Document {
  openapi: string;
  info: { title: string; version: string; license?: { name: string; identifier?: string } };
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }>; securitySchemes: Record<string, Record<string, string>> };
  security?: unknown[];
}

/**
 * Where `value` breaks `schema`, for the JSON Schema the document uses (type, const, enum via
 * anyOf of consts, properties, required, additionalProperties false, items): a list of paths.
 */
function schemaProblems(schema: unknown, value: unknown, at = "$"): string[] {
  const s = schema as Record<string, unknown>;
  if (s.anyOf !== undefined) return (s.anyOf as unknown[]).some((option) => schemaProblems(option, value, at).length === 0) ? [] : [`${at}: none of anyOf`];
  if ("const" in s) return value === s.const ? [] : [`${at}: not ${JSON.stringify(s.const)}`];
  switch (s.type) {
    case "string":
      return typeof value === "string" ? [] : [`${at}: not a string`];
    case "array":
      return Array.isArray(value) ? value.flatMap((item, i) => schemaProblems(s.items, item, `${at}[${i}]`)) : [`${at}: not an array`];
    case "object": {
      if (value === null || typeof value !== "object" || Array.isArray(value)) return [`${at}: not an object`];
      const properties = (s.properties ?? {}) as Record<string, unknown>;
      const record = value as Record<string, unknown>;
      const problems = ((s.required ?? []) as string[]).filter((name) => !(name in record)).map((name) => `${at}.${name}: missing`);
      for (const [name, item] of Object.entries(record)) {
        if (name in properties) problems.push(...schemaProblems(properties[name], item, `${at}.${name}`));
        else if (s.additionalProperties === false) problems.push(`${at}.${name}: not allowed`);
      }
      return problems;
    }
    default:
      return [`${at}: schema type ${String(s.type)} not checked here`];
  }
}

describe("OpenAPI document", () => {
  let t: TestApp;
  let doc: Document;
  beforeAll(async () => {
    t = await buildTestApp();
    const res = await t.request("GET", "/openapi.json");
    expect(res.status).toBe(200);
    expect(mediaType(res)).toBe("application/json");
    doc = await json<Document>(res);
  });
  afterAll(() => t.close());
  /** The routes whose HEAD is documented beside their GET. */
  const publicGets = () => routeTable(t.ctx).filter((route) => route.method === "GET" && !route.auth);

  test("is OpenAPI 3.1 with info, a bearer security scheme and the Error schema", () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info.title).toBe("tokenmint");
    expect(doc.info.version.length).toBeGreaterThan(0);
    expect(Object.values(doc.components.securitySchemes)).toContainEqual(expect.objectContaining({ type: "http", scheme: "bearer" }));
    expect(doc.components.schemas.Error?.required?.sort()).toEqual(["code", "message"]);
  });

  test("names its license (package.json's) and its server: where it was read, a proxy's path prefix included", async () => {
    const pkg = (await Bun.file(new URL("../../package.json", import.meta.url)).json()) as { license: string };
    expect(doc.info.license).toEqual({ name: pkg.license, identifier: pkg.license });
    expect(doc.servers).toEqual([expect.objectContaining({ url: "." })]);
    // As a generated client resolves it: the document read under a prefix, the operations under it too.
    const server = new URL(doc.servers![0]!.url, "https://tokens.example.test/auth/openapi.json");
    expect(new URL(`.${"/v1/providers"}`, server).href).toBe("https://tokens.example.test/auth/v1/providers");
    expect(new URL(doc.servers![0]!.url, "https://tokens.example.test/openapi.json").href).toBe("https://tokens.example.test/");
    expect(Object.values(doc.paths).filter((item) => pathServers(item) !== undefined)).toEqual([]);
  });

  test("an issuer with a path: its RFC 8414 metadata route is at the host's root, beside the prefix", async () => {
    const prefixed = await buildTestApp({ publicUrl: "https://tokens.example.test/auth" });
    try {
      const res = await prefixed.request("GET", "/openapi.json");
      const paths = (await json<Document>(res)).paths;
      const atRoot = Object.entries(paths).filter(([, item]) => pathServers(item) !== undefined);
      expect(atRoot.map(([path, item]) => [path, pathServers(item), Object.keys(item).sort()])).toEqual([
        ["/.well-known/oauth-authorization-server/auth", [expect.objectContaining({ url: "/" })], ["get", "head", "options", "servers"]],
      ]);
    } finally {
      await prefixed.close();
    }
  });

  test("the headers the contract requires are documented where they are sent", () => {
    const header = (path: string, method: string, status: string, name: string) => doc.paths[path]?.[method]?.responses[status]?.headers?.[name];
    for (const path of ["/.well-known/jwks", "/.well-known/jwks.json"]) {
      for (const status of ["200", "304"]) for (const name of ["ETag", "Cache-Control", "Access-Control-Allow-Origin"]) expect({ path, status, name, documented: header(path, "get", status, name) !== undefined }).toEqual({ path, status, name, documented: true });
    }
    expect(header("/.well-known/openid-configuration", "get", "200", "Cache-Control")).toBeDefined();
    expect(header("/.well-known/jwks", "options", "204", "Access-Control-Allow-Methods")?.description).toContain("GET, HEAD");
    for (const [path, status] of [["/v1/providers/{providerId}/clients/{clientId}/tokens", "201"], ["/oauth/token", "200"], ["/oauth/introspect", "200"], ["/oauth/revoke", "200"], ["/v1/providers/{providerId}/clients/{clientId}/secrets", "201"]] as const) {
      expect({ path, cacheControl: header(path, "post", status, "Cache-Control")?.description }).toEqual({ path, cacheControl: expect.stringContaining("no-store") });
    }
    expect(header("/v1/providers", "get", "401", "WWW-Authenticate")?.description).toContain("Bearer");
    expect(header("/oauth/token", "post", "401", "WWW-Authenticate")?.description).toContain("Basic");
    expect(header("/oauth/token", "post", "400", "Cache-Control")?.description).toContain("no-store");
    expect(header("/v1/providers", "get", "405", "Allow")).toBeDefined();
    expect(header("/v1/providers", "get", "503", "Retry-After")).toBeDefined();
    expect(header("/v1/providers", "get", "404", "Cache-Control")).toBeUndefined();
  });

  test("the documented headers are the ones sent", async () => {
    const jwks = await t.request("GET", "/.well-known/jwks");
    const notModified = await t.request("GET", "/.well-known/jwks", undefined, { "if-none-match": jwks.headers.get("etag") as string });
    expect(notModified.status).toBe(304);
    const unauthorized = await t.request("GET", "/v1/providers");
    const wrongMethod = await t.api("PUT", "/v1/providers");
    const oauth = await t.request("POST", "/oauth/token", "grant_type=password", { "content-type": "application/x-www-form-urlencoded" });
    const sent: [Response, string, string, string][] = [
      [jwks, "/.well-known/jwks", "get", "200"],
      [notModified, "/.well-known/jwks", "get", "304"],
      [unauthorized, "/v1/providers", "get", "401"],
      [wrongMethod, "/v1/providers", "get", "405"],
      [oauth, "/oauth/token", "post", "401"],
    ];
    for (const [res, path, method, status] of sent) {
      expect(String(res.status)).toBe(status);
      for (const name of Object.keys(doc.paths[path]?.[method]?.responses[status]?.headers ?? {}).filter((n) => n !== "Retry-After")) {
        expect({ path, status, name, sent: res.headers.has(name) }).toEqual({ path, status, name, sent: true });
      }
    }
  });

  test("the document's own answer is documented as JSON", () => {
    expect(doc.paths["/openapi.json"]?.get?.responses["200"]?.content?.["application/json"]?.schema).toMatchObject({ type: "object", required: ["openapi"] });
  });

  test("a trimmed field's pattern takes a text as sent exactly when the server does", async () => {
    const name = (doc.paths["/v1/providers"]?.post?.requestBody?.content["application/json"]?.schema as { properties: Record<string, { pattern: string; maxLength?: number; description: string }> }).properties.name!;
    expect(name.maxLength).toBeUndefined();
    expect(name.description).toContain("trimmed");
    const pattern = new RegExp(name.pattern, "u");
    const alphabet = ["a", "é", "😀", " ", "\t", "\n", "\r", "\u00a0", "\u2028", "\ufeff", "\u0000", "\u001f", "\u007f", "\u0085"];
    const samples = ["", " ", "a", " a ", "\ta\n", "a\u0000", "\u00a0", "a".repeat(200), ` ${"a".repeat(200)} `, "a".repeat(201), `😀${"a".repeat(199)}`];
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let i = 0; i < 300; i++) {
      const length = Math.floor(random() * 8);
      samples.push(Array.from({ length }, () => alphabet[Math.floor(random() * alphabet.length)]).join(""));
    }
    for (const sample of samples) {
      const res = await t.api("POST", "/v1/providers", { name: sample });
      expect({ sample, documented: pattern.test(sample) }).toEqual({ sample, documented: res.status === 201 });
      if (res.status !== 201) expect({ sample, status: res.status }).toEqual({ sample, status: 400 });
    }
  });

  test("every operation has an operationId, unique, in camelCase: what generated clients name their methods", () => {
    const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(ids.length).toBe(routeTable(t.ctx).length + publicGets().length);
    for (const id of ids) expect(id).toMatch(/^[a-z][a-zA-Z0-9]*$/);
    expect(new Set(ids).size).toBe(ids.length);
    // The names a client calls most: a change here breaks the code generated from the document.
    const named = (method: string, path: string) => doc.paths[path]?.[method]?.operationId;
    expect(named("post", "/v1/providers")).toBe("createProvider");
    expect(named("post", "/v1/providers/{providerId}/clients")).toBe("createClient");
    expect(named("post", "/v1/providers/{providerId}/clients/{clientId}/tokens")).toBe("createToken");
    expect(named("post", "/v1/keys/rotate")).toBe("rotateKeys");
    expect(named("post", "/oauth/token")).toBe("oauthToken");
    expect(named("get", "/.well-known/jwks")).toBe("getJwks");
    expect(named("options", "/.well-known/jwks")).toBe("preflightJwks");
    expect(named("head", "/.well-known/jwks")).toBe("headJwks");
  });

  test("every route of routeTable(ctx) appears under its path and method, with its success status", () => {
    const routes = routeTable(t.ctx);
    expect(routes.length).toBeGreaterThan(15);
    for (const route of routes) {
      const path = route.path.replace(/:(\w+)/g, "{$1}");
      const operation = doc.paths[path]?.[route.method.toLowerCase()];
      expect({ route: `${route.method} ${path}`, present: operation !== undefined }).toEqual({ route: `${route.method} ${path}`, present: true });
      expect(operation?.responses[String(route.success.status)]).toBeDefined();
      const declared = (operation?.parameters ?? []).filter((p) => p.in === "path").map((p) => p.name).sort();
      expect(declared).toEqual([...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string).sort());
      // Ids are UUIDs, said as OpenAPI tools read it (a kid is not one).
      for (const { name, schema } of (operation?.parameters ?? []).filter((p) => p.in === "path" && p.name.endsWith("Id"))) {
        expect({ name, format: (schema as { format?: string }).format }).toEqual({ name, format: "uuid" });
      }
      if (route.auth) expect(operation?.responses["401"]).toBeDefined();
      else expect(operation?.security).toEqual(route.path.startsWith("/oauth/") ? [{ clientBasic: [] }, {}] : []);
    }
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    expect(documented.length).toBe(routes.length + publicGets().length);
  });

  test("a public GET (discovery, the JWKS, health, this document) has a HEAD beside it: its answers without bodies, as the server sends them", async () => {
    const gets = publicGets();
    expect(gets.map((route) => route.path)).toEqual(expect.arrayContaining(["/.well-known/jwks", "/.well-known/openid-configuration", "/healthz", "/openapi.json"]));
    for (const route of gets) {
      const item = doc.paths[route.path] as Record<string, Operation>;
      const get = item.get as Operation;
      const head = item.head as Operation;
      expect({ path: route.path, statuses: Object.keys(head.responses) }).toEqual({ path: route.path, statuses: Object.keys(get.responses) });
      for (const [status, answer] of Object.entries(head.responses)) {
        expect({ path: route.path, status, content: answer.content, headers: answer.headers }).toEqual({ path: route.path, status, content: undefined, headers: get.responses[status]?.headers });
      }
      expect(head.security).toEqual(get.security);
      const [sentGet, sentHead] = [await t.request("GET", route.path), await t.request("HEAD", route.path)];
      expect({ path: route.path, status: sentHead.status, body: await sentHead.text() }).toEqual({ path: route.path, status: sentGet.status, body: "" });
      await sentGet.arrayBuffer();
    }
    // Not under /v1/: HEAD there only doubles a generated client's methods.
    for (const [path, ops] of Object.entries(doc.paths)) if (path.startsWith("/v1/")) expect({ path, head: "head" in ops }).toEqual({ path, head: false });
  });

  test("every operation lists the answers any request may get; writes under /v1/ their body errors; the JWKS its 304", () => {
    for (const route of routeTable(t.ctx)) {
      const path = route.path.replace(/:(\w+)/g, "{$1}");
      const statuses = Object.keys(doc.paths[path]?.[route.method.toLowerCase()]?.responses ?? {});
      // A Host that makes no URL (400), a wrong method (405), a fault (500), shutting down (503).
      const expected = ["400", "405", "500", "503"];
      if (route.auth) expected.push("401");
      if (route.auth && route.method !== "GET") expected.push("413", "415");
      expect({ route: `${route.method} ${path}`, missing: expected.filter((s) => !statuses.includes(s)) }).toEqual({ route: `${route.method} ${path}`, missing: [] });
    }
    for (const path of ["/.well-known/jwks", "/.well-known/jwks.json"]) expect(doc.paths[path]?.get?.responses["304"]?.description).toContain("If-None-Match");
  });

  test("every error response refers to the Error schema, under /oauth/ to the OAuthError schema", () => {
    expect(doc.components.schemas.OAuthError?.required?.sort()).toEqual(["error", "error_description"]);
    for (const [path, ops] of Object.entries(doc.paths)) {
      const schema = path.startsWith("/oauth/") ? "OAuthError" : "Error";
      for (const [method, op] of Object.entries(ops)) {
        for (const [status, response] of Object.entries(op.responses)) {
          // A HEAD's answers have no body.
          if (Number(status) < 400 || method === "head") continue;
          expect({ path, status, schema: response.content?.["application/json"]?.schema }).toEqual({ path, status, schema: { $ref: `#/components/schemas/${schema}` } });
        }
      }
    }
  });

  test("the token endpoint takes a form body and documents its answer and the OAuth error codes", () => {
    const op = doc.paths["/oauth/token"]?.post;
    const form = op?.requestBody?.content["application/x-www-form-urlencoded"]?.schema as { properties: Record<string, unknown>; required: string[] };
    expect(Object.keys(form.properties).sort()).toEqual(["audience", "client_assertion", "client_assertion_type", "client_id", "client_secret", "grant_type", "resource", "scope"]);
    expect(form.required).toEqual(["grant_type"]);
    expect(op?.requestBody?.content["application/json"]).toBeUndefined();
    expect(op?.responses["200"]?.content?.["application/json"]?.schema).toMatchObject({
      properties: { access_token: { type: "string" }, token_type: { const: "Bearer" }, expires_in: { type: "integer" } },
    });
    expect(op?.responses["401"]?.description).toContain("invalid_client");
    for (const code of ["invalid_request", "unsupported_grant_type", "invalid_target", "invalid_scope"]) expect(op?.responses["400"]?.description).toContain(code);
  });

  test("the OAuth endpoints name how a client authenticates: HTTP Basic, or its credentials in the form", () => {
    expect(doc.components.securitySchemes.clientBasic).toMatchObject({ type: "http", scheme: "basic" });
    for (const path of ["/oauth/token", "/oauth/introspect", "/oauth/revoke"]) expect({ path, security: doc.paths[path]?.post?.security }).toEqual({ path, security: [{ clientBasic: [] }, {}] });
    for (const path of ["/.well-known/jwks", "/.well-known/openid-configuration", "/healthz"]) expect({ path, security: doc.paths[path]?.get?.security }).toEqual({ path, security: [] });
  });

  test("the JWKS, discovery and health answers are documented, and the answers match their schemas", async () => {
    const cases: [string, string][] = [
      ["/.well-known/jwks", "application/jwk-set+json"],
      ["/.well-known/jwks.json", "application/jwk-set+json"],
      ["/.well-known/openid-configuration", "application/json"],
      ["/.well-known/oauth-authorization-server", "application/json"],
      ["/healthz", "application/json"],
      ["/readyz", "application/json"],
    ];
    for (const [path, contentType] of cases) {
      const documented = doc.paths[path]?.get?.responses["200"]?.content?.[contentType]?.schema;
      expect({ path, documented: documented !== undefined }).toEqual({ path, documented: true });
      const res = await t.request("GET", path);
      expect(mediaType(res)).toBe(contentType);
      expect({ path, problems: schemaProblems(documented, await res.json()) }).toEqual({ path, problems: [] });
    }
  });

  test("introspection and revocation take a form body with `token`; introspection documents its answer", () => {
    for (const path of ["/oauth/introspect", "/oauth/revoke"]) {
      const op = doc.paths[path]?.post;
      const form = op?.requestBody?.content["application/x-www-form-urlencoded"]?.schema as { properties: Record<string, unknown>; required: string[] };
      expect(Object.keys(form.properties).sort()).toEqual(["client_assertion", "client_assertion_type", "client_id", "client_secret", "token", "token_type_hint"]);
      expect(form.required).toEqual(["token"]);
      expect(op?.responses["401"]?.description).toContain("invalid_client");
    }
    const answer = doc.paths["/oauth/introspect"]?.post?.responses["200"]?.content?.["application/json"]?.schema as { properties: Record<string, unknown>; required: string[] };
    expect(Object.keys(answer.properties).sort()).toEqual(["active", "aud", "client_id", "exp", "iat", "iss", "jti", "sub", "token_type"]);
    expect(answer.required).toEqual(["active"]);
    expect(doc.paths["/oauth/revoke"]?.post?.responses["200"]?.content).toBeUndefined();
    expect(doc.paths["/oauth/revoke"]?.post?.responses["400"]?.description).toContain("unauthorized_client");
    expect(doc.paths["/v1/providers/{providerId}/clients/{clientId}/revoke-tokens"]?.post?.responses["200"]).toBeDefined();
  });

  test("the secrets routes are documented with their schemas", () => {
    const base = "/v1/providers/{providerId}/clients/{clientId}/secrets";
    const created = doc.paths[base]?.post?.responses["201"]?.content?.["application/json"]?.schema as { properties: Record<string, unknown> };
    expect(Object.keys(created.properties)).toEqual(["id", "secret", "lastFour", "createdAt"]);
    expect(doc.paths[base]?.post?.responses["409"]).toBeDefined();
    const listed = doc.paths[base]?.get?.responses["200"]?.content?.["application/json"]?.schema as { properties: { items: { items: { properties: Record<string, unknown> } } } };
    expect(Object.keys(listed.properties.items.items.properties).sort()).toEqual(["createdAt", "id", "lastFour"]);
    expect(doc.paths[`${base}/{secretId}`]?.delete?.responses["204"]).toBeDefined();
  });

  test("the client key routes are documented: PUT takes {keys}, PUT and GET answer a JWK Set of public members only", () => {
    const ops = doc.paths["/v1/providers/{providerId}/clients/{clientId}/jwks"];
    expect(Object.keys(ops ?? {}).sort()).toEqual(["delete", "get", "put"]);
    const body = ops?.put?.requestBody?.content["application/json"]?.schema as { properties: Record<string, Record<string, unknown>>; required: string[] };
    expect(body.required).toEqual(["keys"]);
    expect(body.properties.keys).toMatchObject({ type: "array", minItems: 1, maxItems: 5 });
    for (const method of ["put", "get"] as const) {
      const set = ops?.[method]?.responses["200"]?.content?.["application/json"]?.schema as { properties: { keys: { items: { properties: Record<string, unknown>; additionalProperties: boolean } } } };
      expect(Object.keys(set.properties.keys.items.properties).sort()).toEqual(["alg", "crv", "e", "kid", "kty", "n", "use", "x", "y"]);
      expect(set.properties.keys.items.additionalProperties).toBe(false);
    }
    expect(ops?.put?.responses["400"]).toBeDefined();
    expect(ops?.get?.responses["404"]).toBeDefined();
    expect(ops?.delete?.responses["204"]).toBeDefined();
  });

  test("the token request schema lists expiresIn as an integer with maximum 172800, and the flags as booleans", () => {
    const op = doc.paths["/v1/providers/{providerId}/clients/{clientId}/tokens"]?.post;
    const schema = op?.requestBody?.content["application/json"]?.schema as { properties: Record<string, Record<string, unknown>>; additionalProperties: boolean };
    expect(schema.properties.expiresIn).toMatchObject({ type: "integer", maximum: 172800 });
    for (const flag of ["useJwtType", "audienceAsArray", "forceDefaultDomain"]) expect(schema.properties[flag]).toMatchObject({ type: "boolean" });
    expect(schema.additionalProperties).toBe(false);
    expect(op?.responses["201"]?.content?.["application/json"]?.schema).toMatchObject({
      properties: { accessToken: { type: "string" }, expiresAt: { type: "string", format: "date-time" }, type: { const: "Bearer" } },
    });
  });

  test("listings document limit 1..100 and cursor as query parameters", () => {
    const params = doc.paths["/v1/providers"]?.get?.parameters ?? [];
    expect(params.map((p) => `${p.in}:${p.name}`).sort()).toEqual(["query:cursor", "query:limit"]);
  });

  test("the document leaks no TypeBox internals", () => {
    const text = JSON.stringify(doc);
    expect(text).not.toContain("errorMessage");
    expect(text).not.toContain("[Kind]");
  });
});
