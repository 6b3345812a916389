/**
 * The direct lane answers its routes exactly as the app does: for every request below, success or
 * refusal, the answer through `fetch` (the lane) and through the app alone agree in status,
 * headers and body (tokens compared by their header and claims, all but `jti`). And it takes the
 * requests that go well itself, while every refusal before the handler is the app's own answer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { routeTable } from "../../src/app.ts";
import { directLane } from "../../src/http/direct.ts";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { basic, createSecret, FORM } from "../oauth/support.ts";

interface Sent {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | (() => ReadableStream<Uint8Array>);
}

/** An answer with what legitimately differs between two issuances (the token's jti and signature) taken out. */
async function comparable(res: Response): Promise<{ status: number; headers: Record<string, string>; body: unknown }> {
  const headers = Object.fromEntries([...res.headers].filter(([name]) => name !== "date"));
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: compared as text.
  }
  if (typeof body === "object" && body !== null) {
    for (const field of ["accessToken", "access_token"]) {
      const token = (body as Record<string, unknown>)[field];
      if (typeof token !== "string") continue;
      const { jti, ...claims } = decodeJwt(token);
      expect(jti).toEqual(expect.any(String));
      (body as Record<string, unknown>)[field] = { header: decodeProtectedHeader(token), claims };
    }
  }
  return { status: res.status, headers, body };
}

describe("direct lane", () => {
  let t: TestApp;
  let tokens: string;
  let otherClient: string;
  let clientId: string;
  let secret: string;
  /** Requests the app answered in place of the lane, counted by a lane built on a counting app. */
  let handedOver = 0;
  let lane: (request: Request) => Promise<Response> | Response | undefined;

  beforeAll(async () => {
    t = await buildTestApp({ env: { TOKENMINT_MAX_BODY_BYTES: "1024" } });
    const ids = await createProviderAndClient(t);
    clientId = ids.clientId;
    tokens = `/v1/providers/${ids.providerId}/clients/${ids.clientId}/tokens`;
    otherClient = `/v1/providers/${ids.providerId}/clients/0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d/tokens`;
    secret = (await createSecret(t, ids.providerId, ids.clientId)).secret;
    lane = directLane(t.ctx, routeTable(t.ctx), {
      handle: (request) => {
        handedOver++;
        return t.app.handle(request);
      },
    });
  });
  afterAll(() => t.close());

  const request = (sent: Sent) => {
    const body = typeof sent.body === "function" ? sent.body() : sent.body;
    return new Request(`http://localhost${sent.path}`, { method: sent.method ?? "POST", headers: sent.headers, body, duplex: "half" } as RequestInit);
  };
  const api = (headers: Record<string, string> = {}) => ({ authorization: `Bearer ${t.apiKey}`, ...headers });
  const JSON_TYPE = { "content-type": "application/json" };

  /** Sends `sent` through the lane and through the app alone; both must answer alike. Returns the lane's answer and whether the app took it. */
  async function both(sent: Sent): Promise<{ status: number; headers: Record<string, string>; body: unknown; viaApp: boolean }> {
    const before = handedOver;
    const answer = lane(request(sent));
    const viaLane = await comparable(await (answer ?? t.app.handle(request(sent))));
    const viaApp = await comparable(await t.app.handle(request(sent)));
    expect(viaLane).toEqual(viaApp);
    return { ...viaLane, viaApp: answer === undefined || handedOver > before };
  }

  const issue = (body: string | undefined, headers: Record<string, string> = api(JSON_TYPE), path = tokens) => both({ path, headers, body });

  test("a token request that goes well is answered by the lane, as the app answers it", async () => {
    for (const body of ['{"expiresIn":600}', '{"useJwtType":true,"audienceAsArray":true,"forceDefaultDomain":true}', "", "{}"]) {
      const res = await issue(body);
      expect({ status: res.status, viaApp: res.viaApp }).toEqual({ status: 201, viaApp: false });
      expect(res.headers["cache-control"]).toBe("no-store");
    }
    // No content type with an empty body is an empty body.
    expect(await issue(undefined, api())).toMatchObject({ status: 201, viaApp: false });
  });

  test("the OAuth token endpoint's grants that go well are answered by the lane", async () => {
    const res = await both({ path: "/oauth/token", headers: { ...FORM, authorization: basic(clientId, secret) }, body: "grant_type=client_credentials" });
    expect({ status: res.status, viaApp: res.viaApp }).toEqual({ status: 200, viaApp: false });
    const post = await both({ path: "/oauth/token", headers: FORM, body: new URLSearchParams({ grant_type: "client_credentials", client_id: clientId, client_secret: secret }).toString() });
    expect({ status: post.status, viaApp: post.viaApp }).toEqual({ status: 200, viaApp: false });
  });

  test("refusals before the handler are the app's own answers", async () => {
    const cases: [Sent, number][] = [
      [{ path: tokens, headers: JSON_TYPE, body: "{}" }, 401],
      [{ path: tokens, headers: { ...JSON_TYPE, authorization: "Bearer tm_not-a-key" }, body: "{}" }, 401],
      [{ path: tokens, headers: { ...JSON_TYPE, authorization: "Basic abc" }, body: "{}" }, 401],
      [{ path: tokens, headers: api(JSON_TYPE), body: "{not json" }, 400],
      [{ path: tokens, headers: api(JSON_TYPE), body: "[1]" }, 400],
      [{ path: tokens, headers: api(JSON_TYPE), body: '{"expiresIn":999999}' }, 400],
      [{ path: tokens, headers: api(JSON_TYPE), body: '{"expiresIn":"600"}' }, 400],
      [{ path: tokens, headers: api(JSON_TYPE), body: '{"scope":"x"}' }, 400],
      [{ path: tokens, headers: api({ "content-type": "text/plain" }), body: "{}" }, 415],
      [{ path: tokens, headers: api(JSON_TYPE), body: `{"pad":"${"x".repeat(2000)}"}` }, 413],
      // No declared length: the lane reads the body, finds it too large and hands it over.
      [{ path: tokens, headers: api(JSON_TYPE), body: () => new Blob([`{"pad":"${"x".repeat(2000)}"}`]).stream() }, 413],
      [{ path: tokens, headers: api(JSON_TYPE), body: new TextDecoder("latin1").decode(new Uint8Array([0x7b, 0xff, 0x7d])) }, 400],
      [{ path: "/oauth/token", headers: FORM, body: "grant_type=client_credentials" }, 401],
      [{ path: "/oauth/token", headers: { ...FORM, authorization: basic(clientId, "tms_wrong") }, body: "grant_type=client_credentials" }, 401],
      [{ path: "/oauth/token", headers: { ...FORM, authorization: basic(clientId, secret) }, body: "grant_type=password" }, 400],
      [{ path: "/oauth/token", headers: { ...FORM, authorization: basic(clientId, secret) }, body: "grant_type=client_credentials&grant_type=client_credentials" }, 400],
      [{ path: "/oauth/token", headers: { ...JSON_TYPE, authorization: basic(clientId, secret) }, body: '{"grant_type":"client_credentials"}' }, 400],
    ];
    for (const [sent, status] of cases) {
      const res = await both(sent);
      expect({ path: sent.path, status: res.status }).toEqual({ path: sent.path, status });
      expect(typeof res.body).toBe("object");
    }
  });

  test("paths the lane does not match exactly, and invalid path parameters, go to the app", async () => {
    const cases: [string, number][] = [
      [`${tokens}/`, 201],
      [tokens.replace("/v1/", "/v1//"), 404],
      [`/v1/providers/not-a-uuid/clients/${clientId}/tokens`, 400],
    ];
    for (const [path, status] of cases) {
      const res = await both({ path, headers: api(JSON_TYPE), body: "{}" });
      expect({ path, status: res.status, viaApp: res.viaApp }).toEqual({ path, status, viaApp: true });
    }
  });

  test("what the handler throws is answered by the error hook's mapping, without the app", async () => {
    const res = await issue("{}", api(JSON_TYPE), otherClient);
    expect({ status: res.status, viaApp: res.viaApp }).toEqual({ status: 404, viaApp: false });
    expect(res.body).toEqual({ code: "not_found", message: expect.stringContaining("does not exist") });
    // A fault (here the key ring) is a generic 500 from both.
    const ring = t.ctx.keys.ring.bind(t.ctx.keys);
    t.ctx.keys.ring = () => {
      throw new Error("broken key ring");
    };
    try {
      const fault = await issue("{}");
      expect({ status: fault.status, viaApp: fault.viaApp, body: fault.body }).toEqual({
        status: 500,
        viaApp: false,
        body: { code: "internal_error", message: expect.any(String) },
      });
      expect(JSON.stringify(fault.body)).not.toContain("broken key ring");
    } finally {
      t.ctx.keys.ring = ring;
    }
  });

  test("a body that cannot be read is answered as the app answers it, and nothing is left unhandled", async () => {
    const broken = () =>
      new ReadableStream<Uint8Array>({
        start(controller) {
          controller.error(new Error("connection reset"));
        },
      });
    const res = await both({ path: tokens, headers: api(JSON_TYPE), body: broken });
    expect({ status: res.status, viaApp: res.viaApp }).toEqual({ status: 400, viaApp: false });
    expect(res.body).toEqual({ code: "invalid_request", message: expect.any(String) });
  });

  test("discovery and the JWKS, conditional or not, are answered by the lane", async () => {
    for (const path of ["/.well-known/jwks", "/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"]) {
      const res = await both({ method: "GET", path });
      expect({ path, status: res.status, viaApp: res.viaApp }).toEqual({ path, status: 200, viaApp: false });
    }
    const etag = (await t.fetch(new Request("http://localhost/.well-known/jwks"))).headers.get("etag") as string;
    const conditional = await both({ method: "GET", path: "/.well-known/jwks", headers: { "if-none-match": etag } });
    expect({ status: conditional.status, viaApp: conditional.viaApp }).toEqual({ status: 304, viaApp: false });
  });

  test("the fetch handler sends an answer ready at once as it is; a token's answer comes later, after a turn of the loop", async () => {
    const get = (path: string) => t.fetch(new Request(`http://localhost${path}`));
    // The first request after the writes of beforeAll waits for the process to catch up with them.
    await get("/.well-known/jwks");
    for (const path of ["/.well-known/jwks", "/.well-known/openid-configuration", "/healthz"]) {
      const answer = get(path);
      expect({ path, ready: answer instanceof Response }).toEqual({ path, ready: true });
      expect((answer as Response).status).toBe(200);
    }
    // A token is signed at the end of a turn (runtime/end-of-turn.ts), and its answer follows:
    // never within the request's own callback, nor a few microtasks later.
    const token = t.fetch(request({ path: tokens, headers: api(JSON_TYPE), body: "{}" }));
    expect(token).toBeInstanceOf(Promise);
    let settled = false;
    void Promise.resolve(token).then(() => (settled = true));
    for (let i = 0; i < 5; i++) await Promise.resolve();
    expect(settled).toBe(false);
    expect((await token).status).toBe(201);
  });

  test("the health checks are answered by the lane, so a process just started answers them without compiling the app's pipeline", async () => {
    const fresh = await buildTestApp();
    try {
      const freshLane = directLane(fresh.ctx, routeTable(fresh.ctx), {
        handle: () => {
          throw new Error("the app was asked");
        },
      });
      for (const path of ["/healthz", "/readyz"]) {
        const answer = freshLane(new Request(`http://localhost${path}`));
        expect({ path, lane: answer !== undefined }).toEqual({ path, lane: true });
        expect(await (await (answer as Promise<Response> | Response)).json()).toEqual({ status: path === "/healthz" ? "ok" : "ready" });
      }
    } finally {
      await fresh.close();
    }
    for (const path of ["/healthz", "/readyz"]) {
      const res = await both({ method: "GET", path });
      expect({ path, status: res.status, viaApp: res.viaApp }).toEqual({ path, status: 200, viaApp: false });
    }
    // Any other spelling is the app's, as for every direct route.
    expect((await both({ method: "GET", path: "/readyz/" })).viaApp).toBe(true);
    t.ctx.draining = true;
    try {
      expect(lane(request({ method: "GET", path: "/readyz" }))).toBeUndefined();
      const res = await t.fetch(request({ method: "GET", path: "/readyz" }));
      expect({ status: res.status, body: await res.json() }).toEqual({ status: 503, body: { code: "unavailable", message: expect.stringContaining("shutting down") } });
    } finally {
      t.ctx.draining = false;
    }
  });

  test("while the process drains, the app answers (503)", async () => {
    t.ctx.draining = true;
    try {
      expect(lane(request({ path: tokens, headers: api(JSON_TYPE), body: "{}" }))).toBeUndefined();
      expect((await t.fetch(request({ path: tokens, headers: api(JSON_TYPE), body: "{}" }))).status).toBe(503);
    } finally {
      t.ctx.draining = false;
    }
  });

  test("a request the lane took before draining began gets its own answer, not the draining 503", async () => {
    /** A body whose last part comes once the process drains, as when SIGTERM arrives mid-upload. */
    const slowBody = (first: string, last: string) => {
      let finish!: () => void;
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(first));
          finish = () => {
            controller.enqueue(new TextEncoder().encode(last));
            controller.close();
          };
        },
      });
      return { stream, finish };
    };
    const cases = [
      { path: "/oauth/token", headers: { ...FORM, authorization: basic(clientId, secret) }, first: "gra", last: "nt", status: 400, error: { error: "invalid_request" } },
      { path: tokens, headers: api(JSON_TYPE), first: '{"expiresIn":', last: "}", status: 400, error: { code: "invalid_request" } },
    ];
    for (const { path, headers, first, last, status, error } of cases) {
      const { stream, finish } = slowBody(first, last);
      const answer = Promise.resolve(t.fetch(request({ path, headers, body: () => stream })));
      await new Promise((resolve) => setTimeout(resolve, 20));
      t.ctx.draining = true;
      try {
        finish();
        const res = await answer;
        expect({ path, status: res.status, body: await res.json() }).toEqual({ path, status, body: expect.objectContaining(error) });
        // A request that arrives now is still refused.
        expect((await t.fetch(request({ path, headers, body: first + last }))).status).toBe(503);
      } finally {
        t.ctx.draining = false;
      }
    }
  });

  test("requests answered by the lane are counted and logged as the app's are", async () => {
    const lines: string[] = [];
    const logged = await buildTestApp({ logLines: lines });
    try {
      const ids = await createProviderAndClient(logged);
      // The app logs a request once its answer has gone (an after-response hook): let the last one land.
      await new Promise((resolve) => setImmediate(resolve));
      const path = `/v1/providers/${ids.providerId}/clients/${ids.clientId}/tokens`;
      const requestLines = () => lines.filter((line) => line.includes('"msg":"request"')).map((line) => JSON.parse(line) as Record<string, unknown>);
      const before = requestLines().length;
      expect((await logged.api("POST", path, { expiresIn: 600 })).status).toBe(201);
      await logged.app.handle(new Request(`http://localhost${path}`, { method: "POST", headers: api(JSON_TYPE) }));
      const viaApp = await logged.app.handle(
        new Request(`http://localhost${path}`, { method: "POST", headers: { authorization: `Bearer ${logged.apiKey}`, ...JSON_TYPE }, body: "{}" }),
      );
      expect(viaApp.status).toBe(201);
      await new Promise((resolve) => setImmediate(resolve));
      const added = requestLines().slice(before);
      const route = "/v1/providers/:providerId/clients/:clientId/tokens";
      // The lane's line, the app's 401 (another key) and the app's 201: the same fields, nothing more.
      expect(added.map(({ method, route: r, status }) => ({ method, route: r, status }))).toEqual([
        { method: "POST", route, status: 201 },
        { method: "POST", route, status: 401 },
        { method: "POST", route, status: 201 },
      ]);
      expect(Object.keys(added[0] as object).sort()).toEqual(Object.keys(added[2] as object).sort());
      expect(await logged.metrics()).toContain(`tokenmint_http_requests_total{method="POST",route="${route}",status="201"} 2`);
    } finally {
      await logged.close();
    }
  });
});
