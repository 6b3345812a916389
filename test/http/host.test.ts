/**
 * Requests whose Host header is missing or not a host, sent over a real socket: Bun.serve then
 * builds a `request.url` that is only a path, or that cannot be parsed. Every such request is a
 * `400 invalid_request` in the usual shape, before authentication and routing, and changes nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { metricsHandler } from "../../src/metrics/endpoint.ts";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";

interface RawAnswer {
  status: number;
  headers: string;
  body: string;
}

/** Sends `head` (lines joined with CRLF, then a blank line) and `body` as they are; resolves the answer. */
function raw(port: number, head: string[], body = ""): Promise<RawAnswer> {
  const request = `${head.join("\r\n")}\r\n${body === "" ? "" : `Content-Length: ${Buffer.byteLength(body)}\r\n`}Connection: close\r\n\r\n${body}`;
  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(socket) {
          socket.write(request);
        },
        data(_socket, data) {
          chunks.push(new Uint8Array(data));
        },
        close() {
          const text = Buffer.concat(chunks).toString("utf8");
          const match = /^HTTP\/1\.[01] (\d{3})[^\r\n]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(text);
          if (match === null) reject(new Error(`malformed answer: ${JSON.stringify(text.slice(0, 120))}`));
          else resolve({ status: Number(match[1]), headers: (match[2] as string).toLowerCase(), body: match[3] as string });
        },
        error(_socket, error) {
          reject(error);
        },
        connectError(_socket, error) {
          reject(error);
        },
      },
    }).catch(reject);
  });
}

/** What `served` sets up: an app with one provider and client, served over a real socket. */
interface Served {
  t: TestApp;
  server: ReturnType<typeof Bun.serve>;
  lines: string[];
  tokensPath: string;
}

/** Serves a fresh app for the describe block it is called in (its log lines collected). */
function served(): Served {
  const s = { lines: [] as string[], tokensPath: "" } as Served;
  beforeAll(async () => {
    s.t = await buildTestApp({ logLines: s.lines });
    const { providerId, clientId } = await createProviderAndClient(s.t);
    s.tokensPath = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
    s.server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: s.t.fetch, development: false });
  });
  afterAll(async () => {
    await s.server.stop(true);
    await s.t.close();
  });
  return s;
}

describe("a request without a usable Host header", () => {
  const s = served();

  /** Each way of sending no usable host: the request line's version, then the Host line (if any). */
  const hosts: [string, string | undefined][] = [
    ["HTTP/1.0", undefined],
    ["HTTP/1.1", ""],
    ["HTTP/1.1", "a b"],
    ["HTTP/1.1", "a/b"],
    ["HTTP/1.1", "a@b"],
    ["HTTP/1.1", "@"],
    ["HTTP/1.1", "?"],
    ["HTTP/1.1", "#"],
    ["HTTP/1.1", "[::1"],
  ];
  const send = (method: string, path: string, version: string, host: string | undefined, extra: string[] = [], body = "") =>
    raw(s.server.port as number, [`${method} ${path} ${version}`, ...(host === undefined ? [] : [`Host: ${host}`]), ...extra], body);

  const expect400 = (answer: RawAnswer, label: string) => {
    expect({ label, status: answer.status }).toEqual({ label, status: 400 });
    expect(answer.headers).toContain("content-type: application/json");
    const body = JSON.parse(answer.body) as { code: string; message: string };
    expect(Object.keys(body).sort()).toEqual(["code", "message"]);
    expect(body.code).toBe("invalid_request");
    expect(body.message).toContain("Host");
  };

  test("a management write without an API key is refused and creates nothing", async () => {
    for (const [version, host] of hosts) {
      const label = `${version} Host=${JSON.stringify(host)}`;
      expect400(await send("POST", "/v1/providers", version, host, ["Content-Type: application/json"], '{"name":"sneaky"}'), label);
      expect400(await send("GET", "/v1/providers", version, host), label);
      expect400(await send("DELETE", "/v1/providers/00000000-0000-7000-8000-000000000000", version, host), label);
    }
    const providers = (await (await s.t.api("GET", "/v1/providers")).json()) as { items: { name: string }[] };
    expect(providers.items.map((p) => p.name)).toEqual(["payments"]);
  });

  test("token issuance and discovery are refused the same way, API key or not", async () => {
    for (const [version, host] of hosts) {
      const label = `${version} Host=${JSON.stringify(host)}`;
      expect400(await send("POST", s.tokensPath, version, host, [`Authorization: Bearer ${s.t.apiKey}`]), label);
      expect400(await send("POST", s.tokensPath, version, host), label);
      expect400(await send("GET", "/.well-known/jwks", version, host), label);
      // Under /oauth/, in the RFC 6749 form.
      const oauth = await send("POST", "/oauth/token", version, host, ["Content-Type: application/x-www-form-urlencoded"], "grant_type=client_credentials");
      expect({ label, status: oauth.status, cache: oauth.headers.includes("cache-control: no-store") }).toEqual({ label, status: 400, cache: true });
      expect(JSON.parse(oauth.body)).toEqual({ error: "invalid_request", error_description: expect.stringContaining("Host") });
    }
  });

  test("two Host lines, or a target with a fragment, are refused the same way (RFC 9112 §3.2)", async () => {
    const twoHosts = ["Host: localhost", "Host: evil.example"];
    for (const [method, path, extra] of [
      ["GET", "/.well-known/openid-configuration", []],
      ["GET", "/.well-known/jwks", []],
      ["GET", "/v1/providers", [`Authorization: Bearer ${s.t.apiKey}`]],
      ["POST", s.tokensPath, [`Authorization: Bearer ${s.t.apiKey}`]],
    ] as [string, string, string[]][]) {
      expect400(await raw(s.server.port as number, [`${method} ${path} HTTP/1.1`, ...twoHosts, ...extra]), `two hosts ${method} ${path}`);
      expect400(await send(method, `${path}#/../../v1/providers`, "HTTP/1.1", "localhost", extra), `fragment ${method} ${path}`);
    }
    const providers = (await (await s.t.api("GET", "/v1/providers")).json()) as { items: { name: string }[] };
    expect(providers.items.map((p) => p.name)).toEqual(["payments"]);
  });

  test("health probes are answered whatever the Host: a load balancer's HTTP/1.0 check sends none", async () => {
    for (const [version, host] of hosts) {
      const label = `${version} Host=${JSON.stringify(host)}`;
      const live = await send("GET", "/healthz", version, host);
      expect({ label, status: live.status, body: live.body }).toEqual({ label, status: 200, body: '{"status":"ok"}' });
      const ready = await send("GET", "/readyz?probe=1", version, host);
      expect({ label, status: ready.status, body: ready.body }).toEqual({ label, status: 200, body: '{"status":"ready"}' });
      expect((await send("HEAD", "/healthz", version, host)).status).toBe(200);
      expect((await send("GET", "/healthz/", version, host)).status).toBe(200);
      // Only those two, and only to read.
      expect400(await send("POST", "/healthz", version, host), label);
      expect400(await send("GET", "/healthz/x", version, host), label);
    }
  });

  test("the same requests with a usable Host are answered as usual", async () => {
    expect((await send("GET", "/v1/providers", "HTTP/1.1", "127.0.0.1")).status).toBe(401);
    expect((await send("GET", "/.well-known/jwks", "HTTP/1.0", "localhost")).status).toBe(200);
    expect((await send("POST", s.tokensPath, "HTTP/1.1", "localhost:1234", [`Authorization: Bearer ${s.t.apiKey}`])).status).toBe(201);
  });

  test("what is logged is one JSON request line each, with its route pattern and duration, and no path, id or stack", async () => {
    s.lines.length = 0;
    await send("POST", s.tokensPath, "HTTP/1.1", "a b", [`Authorization: Bearer ${s.t.apiKey}`]);
    expect(s.lines.length).toBe(1);
    const line = JSON.parse(s.lines[0] as string) as Record<string, unknown>;
    expect(line).toMatchObject({ msg: "request", method: "POST", route: "/v1/providers/:providerId/clients/:clientId/tokens", status: 400 });
    expect(line.durationMs).toBeNumber();
    expect(s.lines[0]).not.toContain(s.tokensPath.split("/")[3] as string);
    expect(s.lines[0]).not.toContain("stack");
  });
});

/**
 * Bun.serve builds `request.url` as `http://` + the Host header + the target. A Host of one to
 * three characters makes the path start before the URL's 12th character; the router must still
 * see the very path every check of the request reads.
 */
describe("a Host header of one to three characters", () => {
  const s = served();
  const send = (method: string, path: string, host: string, extra: string[] = [], body = "") =>
    raw(s.server.port as number, [`${method} ${path} HTTP/1.1`, `Host: ${host}`, ...extra], body);
  const json = ["Content-Type: application/json"];
  const withKey = () => [`Authorization: Bearer ${s.t.apiKey}`];

  test("a path that is a /v1 path only past the host's length is no way around the API key", async () => {
    // With the router reading from the 12th character on, each of these reached createProvider without a key.
    const sneaky: [string, string][] = [
      ["a", "/xy/v1/providers"],
      ["ab", "/x/v1/providers"],
      ["abc", "//v1/providers"],
      ["a:1", "//v1/providers"],
    ];
    for (const [host, path] of sneaky) {
      for (const extra of [[], withKey()]) {
        const answer = await send("POST", path, host, [...json, ...extra], '{"name":"sneaky"}');
        const label = `${host} ${path}`;
        expect({ label, status: answer.status, code: (JSON.parse(answer.body) as { code: string }).code }).toEqual({ label, status: 404, code: "not_found" });
      }
    }
    // Nothing was written, under the caller's project or under none.
    for (const projectId of [s.t.ctx.projectId, ""]) {
      const page = await s.t.ctx.store.listProviders(projectId, { limit: 100 });
      expect(page.items.map((p) => p.name)).toEqual(projectId === "" ? [] : ["payments"]);
    }
  });

  test("every route is routed by its own path and needs its API key", async () => {
    for (const host of ["a", "ab", "abc", "a:1"]) {
      expect({ host, status: (await send("GET", "/v1/providers", host)).status }).toEqual({ host, status: 401 });
      const listed = await send("GET", "/v1/providers", host, withKey());
      expect({ host, status: listed.status }).toEqual({ host, status: 200 });
      expect((JSON.parse(listed.body) as { items: { name: string }[] }).items.map((p) => p.name)).toEqual(["payments"]);
      expect({ host, status: (await send("GET", "/v1/keys", host, withKey())).status }).toEqual({ host, status: 200 });
      expect({ host, status: (await send("POST", s.tokensPath, host, withKey())).status }).toEqual({ host, status: 201 });
      expect({ host, status: (await send("GET", "/v1/nothing-here", host, withKey())).status }).toEqual({ host, status: 404 });
      const preflight = await send("OPTIONS", "/.well-known/jwks", host);
      expect({ host, status: preflight.status }).toEqual({ host, status: 204 });
      expect(preflight.headers).toContain("access-control-allow-methods: get, head");
      expect({ host, status: (await send("GET", "/healthz", host)).status }).toEqual({ host, status: 200 });
    }
  });

  test("discovery reached through the app is still never logged; management lines carry the pattern", async () => {
    s.lines.length = 0;
    await send("OPTIONS", "/.well-known/jwks", "ab");
    await send("OPTIONS", "/.well-known/openid-configuration", "a");
    expect(s.lines).toEqual([]);
    await send("GET", "/v1/providers", "ab", withKey());
    expect(s.lines.length).toBe(1);
    expect(JSON.parse(s.lines[0] as string)).toMatchObject({ msg: "request", method: "GET", route: "/v1/providers", status: 200 });
  });
});

describe("the metrics listener", () => {
  test("answers a scrape without a usable Host header, and 404 JSON for other paths, never a 500", async () => {
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: metricsHandler(() => "up 1\n"), development: false });
    try {
      const port = server.port as number;
      for (const host of [[], ["Host: a b"], ["Host: [::1"]]) {
        const scrape = await raw(port, ["GET /metrics HTTP/1.0", ...host]);
        expect({ status: scrape.status, body: scrape.body }).toEqual({ status: 200, body: "up 1\n" });
        const other = await raw(port, ["GET /v1/providers HTTP/1.0", ...host]);
        expect(other.status).toBe(404);
        expect((JSON.parse(other.body) as { code: string }).code).toBe("not_found");
      }
    } finally {
      await server.stop(true);
    }
  });
});

