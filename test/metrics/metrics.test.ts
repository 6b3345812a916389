/**
 * The service's metrics, through buildTestApp (no sockets): HTTP counters by route pattern and
 * status, tokens by algorithm, key gauges on a fake clock, process gauges, the metrics endpoint,
 * and that no label ever carries an id, a name or an audience.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { metricsHandler } from "../../src/metrics/endpoint.ts";
import { buildTestApp, createProviderAndClient, type TestApp, type TestAppOptions } from "../helpers/app.ts";
import { UNKNOWN_ID } from "../http/support.ts";

const opened: TestApp[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.close();
});

async function app(options: TestAppOptions = {}): Promise<TestApp> {
  const t = await buildTestApp(options);
  opened.push(t);
  return t;
}

/** The value of the sample written exactly as `series` (name plus label text), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const requests = (method: string, route: string, status: number) => `tokenmint_http_requests_total{method="${method}",route="${route}",status="${status}"}`;

describe("HTTP request metrics", () => {
  test("count every request by method, route pattern and status, discovery and unknown routes included", async () => {
    const t = await app();
    const { providerId } = await createProviderAndClient(t);
    expect((await t.api("GET", "/v1/providers")).status).toBe(200);
    expect((await t.api("GET", "/v1/providers")).status).toBe(200);
    expect((await t.api("GET", `/v1/providers/${providerId}`)).status).toBe(200);
    expect((await t.api("GET", `/v1/providers/${UNKNOWN_ID}`)).status).toBe(404);
    expect((await t.request("GET", "/v1/providers")).status).toBe(401);
    expect((await t.api("GET", "/nowhere/at/all")).status).toBe(404);
    expect((await t.api("DELETE", "/v1/keys")).status).toBe(405);
    const jwks = await t.request("GET", "/.well-known/jwks");
    expect(jwks.status).toBe(200);
    expect((await t.request("GET", "/.well-known/jwks", undefined, { "if-none-match": jwks.headers.get("etag") as string })).status).toBe(304);
    expect((await t.request("GET", "/.well-known/openid-configuration")).status).toBe(200);
    expect((await t.request("GET", "/healthz")).status).toBe(200);

    const text = await t.metrics();
    expect(sample(text, requests("POST", "/v1/providers", 201))).toBe(1);
    expect(sample(text, requests("POST", "/v1/providers/:providerId/clients", 201))).toBe(1);
    expect(sample(text, requests("GET", "/v1/providers", 200))).toBe(2);
    expect(sample(text, requests("GET", "/v1/providers/:providerId", 200))).toBe(1);
    expect(sample(text, requests("GET", "/v1/providers/:providerId", 404))).toBe(1);
    expect(sample(text, requests("GET", "/v1/providers", 401))).toBe(1);
    expect(sample(text, requests("GET", "(unmatched)", 404))).toBe(1);
    expect(sample(text, requests("DELETE", "/v1/keys", 405))).toBe(1);
    expect(sample(text, requests("GET", "/.well-known/jwks", 200))).toBe(1);
    expect(sample(text, requests("GET", "/.well-known/jwks", 304))).toBe(1);
    expect(sample(text, requests("GET", "/.well-known/openid-configuration", 200))).toBe(1);
    expect(sample(text, requests("GET", "/healthz", 200))).toBe(1);
    const total = text
      .split("\n")
      .filter((l) => l.startsWith("tokenmint_http_requests_total{"))
      .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
    expect(total).toBe(13);

    // The histogram: one series per method and route pattern, count equal to the requests.
    expect(sample(text, 'tokenmint_http_request_duration_seconds_count{method="GET",route="/v1/providers"}')).toBe(3);
    expect(sample(text, 'tokenmint_http_request_duration_seconds_bucket{method="GET",route="/v1/providers",le="+Inf"}')).toBe(3);
    expect(sample(text, 'tokenmint_http_request_duration_seconds_bucket{method="GET",route="/v1/providers",le="0.0005"}')).toBeNumber();
    expect(sample(text, 'tokenmint_http_request_duration_seconds_bucket{method="GET",route="/v1/providers",le="2.5"}')).toBeNumber();
    expect(sample(text, 'tokenmint_http_request_duration_seconds_sum{method="GET",route="/v1/providers"}')).toBeGreaterThan(0);
    expect(text).toContain("# TYPE tokenmint_http_request_duration_seconds histogram");
    expect(text).toContain("# TYPE tokenmint_http_requests_total counter");
  });

  test("an unusual method is counted as other", async () => {
    const t = await app();
    await t.request("PROPFIND", "/v1/providers");
    expect(await t.metrics()).toMatch(/tokenmint_http_requests_total\{method="other",route="\/v1\/providers",status="\d+"\} 1/);
  });
});

describe("token and key metrics", () => {
  test("tokens_issued_total counts signed tokens by algorithm", async () => {
    for (const alg of ["ES256", "EdDSA"] as const) {
      const t = await app({ alg });
      const { providerId, clientId } = await createProviderAndClient(t);
      const path = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
      expect((await t.api("POST", path)).status).toBe(201);
      expect((await t.api("POST", path, { expiresIn: 60, useJwtType: true })).status).toBe(201);
      expect((await t.api("POST", path, { expiresIn: -1 })).status).toBe(400);
      const text = await t.metrics();
      expect(sample(text, `tokenmint_tokens_issued_total{alg="${alg}"}`)).toBe(2);
      expect(text.split("\n").filter((l) => l.startsWith("tokenmint_tokens_issued_total{"))).toHaveLength(1);
    }
  });

  test("jwks_keys and the rotation gauge follow the key set on the fake clock", async () => {
    const t = await app({ rotationPeriod: 3600 });
    let text = await t.metrics();
    expect(sample(text, "tokenmint_jwks_keys")).toBe(2);
    expect(sample(text, "tokenmint_key_rotation_seconds")).toBe(3600);

    t.clock.advance(600);
    expect(sample(await t.metrics(), "tokenmint_key_rotation_seconds")).toBe(3000);

    // Just rotated: a whole period ahead again, and the retired key is still published.
    expect((await t.api("POST", "/v1/keys/rotate")).status).toBe(200);
    text = await t.metrics();
    expect(sample(text, "tokenmint_key_rotation_seconds")).toBe(3600);
    expect(sample(text, "tokenmint_jwks_keys")).toBe(3);

    // The timer's own rotation, too.
    t.clock.advance(3600);
    expect(sample(await t.metrics(), "tokenmint_key_rotation_seconds")).toBe(0);
    await t.ctx.keys.tick();
    text = await t.metrics();
    expect(sample(text, "tokenmint_key_rotation_seconds")).toBe(3600);
    expect(sample(text, "tokenmint_jwks_keys")).toBe(4);

    // Revoking a retired key takes it out of the JWKS at once.
    const keys = (await (await t.api("GET", "/v1/keys")).json()) as { items: { kid: string; state: string }[] };
    const retired = keys.items.find((k) => k.state === "retired") as { kid: string };
    expect((await t.api("POST", `/v1/keys/${retired.kid}/revoke`)).status).toBe(200);
    expect(sample(await t.metrics(), "tokenmint_jwks_keys")).toBe(3);
  });

  test("with automatic rotation off the rotation gauge has no sample", async () => {
    const t = await app({ rotationPeriod: 0 });
    const text = await t.metrics();
    expect(text).toContain("# TYPE tokenmint_key_rotation_seconds gauge\n");
    expect(text.split("\n").some((l) => l.startsWith("tokenmint_key_rotation_seconds"))).toBe(false);
    expect(sample(text, "tokenmint_jwks_keys")).toBe(2);
  });

  test("process gauges: resident memory, heap and start time", async () => {
    const t = await app();
    const text = await t.metrics();
    expect(sample(text, "tokenmint_process_resident_memory_bytes")).toBeGreaterThan(1_000_000);
    expect(sample(text, "tokenmint_process_heap_used_bytes")).toBeGreaterThan(0);
    const start = sample(text, "tokenmint_process_start_time_seconds") as number;
    expect(start).toBeLessThanOrEqual(Date.now() / 1000);
    expect(start).toBeGreaterThan(Date.now() / 1000 - 24 * 3600);
    for (const name of ["tokenmint_process_resident_memory_bytes", "tokenmint_process_heap_used_bytes", "tokenmint_process_start_time_seconds"]) {
      expect(text).toContain(`# TYPE ${name} gauge\n`);
    }
  });
});

describe("no label carries an id, a name or an audience", () => {
  test("after a workload with sentinel names and audiences, the metrics text holds none of them", async () => {
    const t = await app();
    const sentinels = ["PROVIDER-SENTINEL-111", "DESCRIPTION-SENTINEL-222", "CLIENT-SENTINEL-333", "https://AUD-SENTINEL-444.example", "RENAMED-SENTINEL-555"];
    const ids: string[] = [t.ctx.projectId];
    const provider = (await (await t.api("POST", "/v1/providers", { name: sentinels[0], description: sentinels[1] })).json()) as { id: string };
    ids.push(provider.id);
    const client = (await (await t.api("POST", `/v1/providers/${provider.id}/clients`, { name: sentinels[2], audience: sentinels[3] })).json()) as {
      id: string;
    };
    ids.push(client.id);
    const clientPath = `/v1/providers/${provider.id}/clients/${client.id}`;
    const token = (await (await t.api("POST", `${clientPath}/tokens`, { audienceAsArray: true })).json()) as { accessToken: string };
    await t.api("PATCH", `/v1/providers/${provider.id}`, { name: sentinels[4] });
    await t.api("GET", clientPath);
    await t.api("GET", `/v1/providers/${provider.id}/clients`);
    await t.api("GET", `/v1/providers/${crypto.randomUUID()}/clients/${crypto.randomUUID()}`);
    await t.api("GET", `/v1/${sentinels[0]}/${provider.id}`);
    await t.request("GET", `/.well-known/jwks?client=${client.id}`);
    const keys = (await (await t.api("GET", "/v1/keys")).json()) as { items: { kid: string }[] };

    const text = await t.metrics();
    const forbidden = [...sentinels, ...ids, t.apiKey, token.accessToken, ...keys.items.map((k) => k.kid), "SENTINEL", "example"];
    for (const value of forbidden) expect(text).not.toContain(value);
    expect(text).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/);

    // Every label is one of the declared system facts.
    const labelNames = new Set([...text.matchAll(/[{,]([a-z_]+)="/g)].map((m) => m[1]));
    expect([...labelNames].sort()).toEqual(["alg", "le", "method", "route", "status"]);
    const routes = new Set([...text.matchAll(/route="([^"]*)"/g)].map((m) => m[1] as string));
    const patterns = new Set([...t.app.routes.map((r) => r.path), "(unmatched)"]);
    for (const route of routes) expect(patterns.has(route)).toBe(true);
  });
});

describe("the metrics endpoint", () => {
  const handler = metricsHandler(() => "# HELP x y\n# TYPE x gauge\nx 1\n");

  test("GET /metrics answers the exposition text with the 0.0.4 content type", async () => {
    const res = handler(new Request("http://127.0.0.1:9100/metrics"));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(await res.text()).toBe("# HELP x y\n# TYPE x gauge\nx 1\n");
    const head = handler(new Request("http://127.0.0.1:9100/metrics", { method: "HEAD" }));
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  test("another method on /metrics is 405 method_not_allowed with Allow, in the usual error shape", async () => {
    for (const method of ["POST", "DELETE", "PUT", "OPTIONS"]) {
      const res = handler(new Request("http://127.0.0.1:9100/metrics", { method }));
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, HEAD");
      expect(res.headers.get("content-type")).toStartWith("application/json");
      const body = (await res.json()) as { code: string; message: string };
      expect(body.code).toBe("method_not_allowed");
      expect(body.message).toBe(`${method} is not supported on /metrics; use GET, HEAD.`);
    }
  });

  test("any other path is 404 not_found in the usual error shape", async () => {
    for (const [method, path] of [
      ["GET", "/"],
      ["GET", "/metrics/"],
      ["GET", "/v1/providers"],
      ["POST", "/v1/providers"],
      ["DELETE", "/"],
    ] as const) {
      const res = handler(new Request(`http://127.0.0.1:9100${path}`, { method }));
      expect(res.status).toBe(404);
      expect(res.headers.get("content-type")).toStartWith("application/json");
      expect(((await res.json()) as { code: string }).code).toBe("not_found");
    }
  });
});
