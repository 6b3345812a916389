/**
 * Helpers of the OAuth tests: token requests with a form body, client secrets through the API,
 * and the exact RFC 6749 §5.2 error shape.
 */
import { expect } from "bun:test";
import type { TestApp } from "../helpers/app.ts";
import { json, mediaType } from "../http/support.ts";

export const FORM = { "content-type": "application/x-www-form-urlencoded" };

/** The `Authorization: Basic` value of RFC 6749 §2.3.1: form-urlencoded id and secret. */
export const basic = (clientId: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString("base64")}`;

/** POST /oauth/token with `params` form-encoded (a string is sent as is). */
export function tokenRequest(t: TestApp, params: Record<string, string> | string, headers: Record<string, string> = {}): Promise<Response> {
  const body = typeof params === "string" ? params : new URLSearchParams(params).toString();
  return t.request("POST", "/oauth/token", body, { ...FORM, ...headers });
}

export interface CreatedSecret {
  id: string;
  secret: string;
  lastFour: string;
  createdAt: string;
}

/** Creates a client secret through the management API (expects 201). */
export async function createSecret(t: TestApp, providerId: string, clientId: string): Promise<CreatedSecret> {
  const res = await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/secrets`);
  expect({ status: res.status, body: res.status === 201 ? "" : await res.clone().text() }).toEqual({ status: 201, body: "" });
  return json<CreatedSecret>(res);
}

export interface OAuthErrorBody {
  error: string;
  error_description: string;
}

/** RFC 6749 §5.2: the characters error_description may use. */
const DESCRIPTION_CHARS = /^[\x20\x21\x23-\x5b\x5d-\x7e]+$/;

/**
 * Asserts an RFC 6749 §5.2 error: exact status, JSON, a body of exactly `{error,
 * error_description}` with the exact `error`, `Cache-Control: no-store`, and (when given) a
 * description containing `mention`.
 */
export async function expectOAuthError(res: Response, status: number, error: string, mention?: string | RegExp): Promise<OAuthErrorBody> {
  const text = await res.text();
  expect({ status: res.status, text }).toEqual({ status, text: expect.any(String) });
  expect(mediaType(res)).toBe("application/json");
  expect(res.headers.get("cache-control")).toBe("no-store");
  const body = JSON.parse(text) as OAuthErrorBody;
  expect(Object.keys(body).sort()).toEqual(["error", "error_description"]);
  expect(body.error).toBe(error);
  expect(body.error_description).toMatch(DESCRIPTION_CHARS);
  if (typeof mention === "string") expect(body.error_description).toContain(mention);
  else if (mention !== undefined) expect(body.error_description).toMatch(mention);
  return body;
}

/** Asserts `invalid_client`: 401 with the Basic challenge. */
export async function expectInvalidClient(res: Response, mention?: string | RegExp): Promise<OAuthErrorBody> {
  expect(res.headers.get("www-authenticate")).toBe('Basic realm="tokenmint"');
  return expectOAuthError(res, 401, "invalid_client", mention);
}

/** POST to an OAuth endpoint with `params` form-encoded (a string is sent as is). */
export function formRequest(t: TestApp, path: string, params: Record<string, string> | string, headers: Record<string, string> = {}): Promise<Response> {
  const body = typeof params === "string" ? params : new URLSearchParams(params).toString();
  return t.request("POST", path, body, { ...FORM, ...headers });
}

/** A client with one secret, created through the management API. */
export interface TestClient {
  providerId: string;
  clientId: string;
  secret: string;
  /** Its `Authorization: Basic` header. */
  auth: Record<string, string>;
}

/** Creates a client (under `providerId`, or a new provider) and a secret for it. */
export async function createTestClient(t: TestApp, providerId?: string, audience = "https://api.example.test"): Promise<TestClient> {
  let pid = providerId;
  if (pid === undefined) {
    const provider = await t.api("POST", "/v1/providers", { name: "payments" });
    expect(provider.status).toBe(201);
    pid = ((await provider.json()) as { id: string }).id;
  }
  const res = await t.api("POST", `/v1/providers/${pid}/clients`, { name: "worker", audience });
  expect(res.status).toBe(201);
  const clientId = ((await res.json()) as { id: string }).id;
  const { secret } = await createSecret(t, pid, clientId);
  return { providerId: pid, clientId, secret, auth: { authorization: basic(clientId, secret) } };
}

/** An access token for `client` from the token endpoint (expects 200). */
export async function issueToken(t: TestApp, client: TestClient): Promise<string> {
  const res = await tokenRequest(t, { grant_type: "client_credentials" }, client.auth);
  expect({ status: res.status, body: res.status === 200 ? "" : await res.clone().text() }).toEqual({ status: 200, body: "" });
  return ((await res.json()) as { access_token: string }).access_token;
}

/** POST /oauth/introspect as `caller` and the answer's body (expects 200, not cached). */
export async function introspect(t: TestApp, caller: TestClient, token: string, extra: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const res = await formRequest(t, "/oauth/introspect", { token, ...extra }, caller.auth);
  expect({ status: res.status, body: res.status === 200 ? "" : await res.clone().text() }).toEqual({ status: 200, body: "" });
  expect(mediaType(res)).toBe("application/json");
  expect(res.headers.get("cache-control")).toBe("no-store");
  return json<Record<string, unknown>>(res);
}

/** Whether introspection by `caller` reports `token` active. */
export const isActive = async (t: TestApp, caller: TestClient, token: string) => (await introspect(t, caller, token)).active;

/** POST /oauth/revoke as `caller`. */
export const revoke = (t: TestApp, caller: TestClient, token: string, extra: Record<string, string> = {}) =>
  formRequest(t, "/oauth/revoke", { token, ...extra }, caller.auth);

/** Asserts the RFC 7009 success: 200, empty body, not cached. */
export async function expectRevoked(res: Response): Promise<void> {
  expect({ status: res.status, body: await res.text() }).toEqual({ status: 200, body: "" });
  expect(res.headers.get("cache-control")).toBe("no-store");
}
