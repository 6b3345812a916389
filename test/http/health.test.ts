import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { buildTestApp, type TestApp } from "../helpers/app.ts";

describe("health endpoints", () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await buildTestApp();
  });
  afterEach(() => t.close());

  test("/healthz answers 200 without authentication", async () => {
    const res = await t.request("GET", "/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  test("/readyz is 200 when the store answers and the keys are loaded", async () => {
    const res = await t.request("GET", "/readyz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ready" });
  });

  test("/readyz is 503 unavailable when the store fails", async () => {
    t.ctx.store.getMeta = () => Promise.reject(new Error("disk gone"));
    const res = await t.request("GET", "/readyz");
    expect(res.status).toBe(503);
    const body = (await res.json()) as { code: string; message: string };
    expect(body.code).toBe("unavailable");
    expect(body.message).not.toContain("disk gone");
  });

  test("/readyz is 503 while draining, /healthz 200: the process is up", async () => {
    t.ctx.draining = true;
    try {
      const res = await t.request("GET", "/readyz");
      expect(res.status).toBe(503);
      expect(((await res.json()) as { code: string }).code).toBe("unavailable");
      for (const path of ["/healthz", "/healthz/"]) {
        const live = await t.request("GET", path);
        expect({ path, status: live.status, body: await live.json() }).toEqual({ path, status: 200, body: { status: "ok" } });
      }
      // Anything else is turned away, closing the connection.
      const other = await t.request("GET", "/.well-known/jwks");
      expect({ status: other.status, connection: other.headers.get("connection") }).toEqual({ status: 503, connection: "close" });
    } finally {
      t.ctx.draining = false;
    }
  });
});
