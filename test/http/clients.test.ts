/** CONTRACT §2: /v1/providers/{providerId}/clients — shapes, paging, name/audience rules, scoping. */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { decodeJwt } from "jose";
import { buildTestApp, T0, type TestApp } from "../helpers/app.ts";
import { bodyOf, expectError, ISO_RE, json, UNKNOWN_ID, UUID_RE } from "./support.ts";

interface Client {
  id: string;
  providerId: string;
  name: string;
  audience: string;
  createdAt: string;
}
interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

const newProvider = async (t: TestApp, name = "payments") => (await json<{ id: string }>(await t.api("POST", "/v1/providers", { name }))).id;
const create = async (t: TestApp, providerId: string, body: unknown) => {
  const res = await t.api("POST", `/v1/providers/${providerId}/clients`, body);
  expect(res.status).toBe(201);
  return json<Client>(res);
};

describe("clients: success shapes", () => {
  let t: TestApp;
  let providerId: string;
  beforeEach(async () => {
    t = await buildTestApp();
    providerId = await newProvider(t);
  });
  afterEach(() => t.close());

  test("POST answers 201 with {id, name, audience} (and providerId, createdAt)", async () => {
    const res = await t.api("POST", `/v1/providers/${providerId}/clients`, { name: "worker", audience: "https://api.example.test" });
    expect(res.status).toBe(201);
    const body = await json<Client>(res);
    expect(body.id).toMatch(UUID_RE);
    expect(body.createdAt).toMatch(ISO_RE);
    expect(body).toEqual({ id: body.id, providerId, name: "worker", audience: "https://api.example.test", createdAt: new Date(T0).toISOString() });
  });

  test("GET one returns what POST returned", async () => {
    const created = await create(t, providerId, { name: "w", audience: "a" });
    const res = await t.api("GET", `/v1/providers/${providerId}/clients/${created.id}`);
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual(created);
  });

  test("list returns only this provider's clients with nextCursor null", async () => {
    const a = await create(t, providerId, { name: "a", audience: "x" });
    const other = await newProvider(t, "other");
    await create(t, other, { name: "elsewhere", audience: "y" });
    const res = await t.api("GET", `/v1/providers/${providerId}/clients`);
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual({ items: [a], nextCursor: null });
  });

  test("limit=1 pages through 3 clients oldest first until nextCursor is null", async () => {
    const created: Client[] = [];
    for (const name of ["one", "two", "three"]) {
      created.push(await create(t, providerId, { name, audience: "aud" }));
      t.clock.advance(1);
    }
    const pages: Page<Client>[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? "limit=1" : `limit=1&cursor=${encodeURIComponent(cursor)}`;
      const res = await t.api("GET", `/v1/providers/${providerId}/clients?${query}`);
      expect(res.status).toBe(200);
      const page: Page<Client> = await json<Page<Client>>(res);
      pages.push(page);
      cursor = page.nextCursor;
    } while (cursor !== null && pages.length < 10);
    expect(pages.map((p) => p.items.length)).toEqual([1, 1, 1]);
    expect(pages.flatMap((p) => p.items)).toEqual(created);
  });

  test("PATCH changes only the fields sent", async () => {
    const created = await create(t, providerId, { name: "old", audience: "aud-1" });
    const res = await t.api("PATCH", `/v1/providers/${providerId}/clients/${created.id}`, { name: " new " });
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual({ ...created, name: "new" });
    const res2 = await t.api("PATCH", `/v1/providers/${providerId}/clients/${created.id}`, { audience: "aud-2" });
    expect(await bodyOf(res2)).toEqual({ ...created, name: "new", audience: "aud-2" });
  });

  test("PATCH with no field answers the client as it is and writes nothing", async () => {
    const created = await create(t, providerId, { name: "same", audience: "aud-kept" });
    const stored = await t.ctx.store.getClient(t.ctx.projectId, providerId, created.id);
    t.clock.advance(5);
    const res = await t.api("PATCH", `/v1/providers/${providerId}/clients/${created.id}`, {});
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual(created);
    expect(await bodyOf(await t.api("GET", `/v1/providers/${providerId}/clients/${created.id}`))).toEqual(created);
    expect(await t.ctx.store.getClient(t.ctx.projectId, providerId, created.id)).toEqual(stored);
    await expectError(await t.api("PATCH", `/v1/providers/${providerId}/clients/${UNKNOWN_ID}`, {}), 404, "not_found");
  });

  test("PATCH audience changes the aud of tokens issued afterwards", async () => {
    const created = await create(t, providerId, { name: "w", audience: "https://before.example.test" });
    const tokens = `/v1/providers/${providerId}/clients/${created.id}/tokens`;
    const before = await json<{ accessToken: string }>(await t.api("POST", tokens));
    expect(decodeJwt(before.accessToken).aud).toBe("https://before.example.test");
    expect((await t.api("PATCH", `/v1/providers/${providerId}/clients/${created.id}`, { audience: "https://after.example.test" })).status).toBe(200);
    const after = await json<{ accessToken: string }>(await t.api("POST", tokens));
    expect(decodeJwt(after.accessToken).aud).toBe("https://after.example.test");
  });

  test("DELETE answers 204, then GET is 404 and the provider can be deleted", async () => {
    const created = await create(t, providerId, { name: "w", audience: "a" });
    const res = await t.api("DELETE", `/v1/providers/${providerId}/clients/${created.id}`);
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    await expectError(await t.api("GET", `/v1/providers/${providerId}/clients/${created.id}`), 404, "not_found");
    await expectError(await t.api("DELETE", `/v1/providers/${providerId}/clients/${created.id}`), 404, "not_found");
    expect((await t.api("DELETE", `/v1/providers/${providerId}`)).status).toBe(204);
  });
});

describe("clients: field rules", () => {
  let t: TestApp;
  let providerId: string;
  let existing: Client;
  beforeAll(async () => {
    t = await buildTestApp();
    providerId = await newProvider(t);
    existing = await create(t, providerId, { name: "existing", audience: "aud" });
  });
  afterAll(() => t.close());

  test("name and audience are trimmed", async () => {
    const c = await create(t, providerId, { name: " a ", audience: "\t https://api.example.test \n" });
    expect([c.name, c.audience]).toEqual(["a", "https://api.example.test"]);
  });

  test("200 characters after trimming are accepted for both", async () => {
    const c = await create(t, providerId, { name: ` ${"n".repeat(200)} `, audience: ` ${"a".repeat(200)} ` });
    expect([c.name.length, c.audience.length]).toEqual([200, 200]);
  });

  const bad: [string, unknown][] = [
    ["empty", ""],
    ["only spaces", "   "],
    ["201 characters", "x".repeat(201)],
    ["a C0 control character", "a\u0001b"],
    ["DEL", "a\u007fb"],
    ["a number", 7],
    ["null", null],
  ];
  for (const field of ["name", "audience"] as const) {
    const other = field === "name" ? { audience: "aud" } : { name: "n" };
    test(`${field} missing on create → 400 naming '${field}'`, async () => {
      await expectError(await t.api("POST", `/v1/providers/${providerId}/clients`, other), 400, "invalid_request", field);
    });
    for (const [label, value] of bad) {
      test(`${field} ${label} → 400 naming '${field}' (create and patch)`, async () => {
        await expectError(await t.api("POST", `/v1/providers/${providerId}/clients`, { ...other, [field]: value }), 400, "invalid_request", field);
        await expectError(
          await t.api("PATCH", `/v1/providers/${providerId}/clients/${existing.id}`, { [field]: value }),
          400,
          "invalid_request",
          field,
        );
      });
    }
  }

  test("an unknown body field is 400 naming it", async () => {
    await expectError(await t.api("POST", `/v1/providers/${providerId}/clients`, { name: "a", audience: "b", secret: "s" }), 400, "invalid_request", "secret");
    await expectError(await t.api("PATCH", `/v1/providers/${providerId}/clients/${existing.id}`, { providerId }), 400, "invalid_request", "providerId");
  });

  test("the existing client was never changed by the rejected patches", async () => {
    expect(await bodyOf(await t.api("GET", `/v1/providers/${providerId}/clients/${existing.id}`))).toEqual(existing);
  });
});

describe("clients: scoping, paths and queries", () => {
  let t: TestApp;
  let providerId: string;
  let otherProviderId: string;
  let client: Client;
  beforeAll(async () => {
    t = await buildTestApp();
    providerId = await newProvider(t);
    otherProviderId = await newProvider(t, "other");
    client = await create(t, providerId, { name: "w", audience: "a" });
  });
  afterAll(() => t.close());

  test("create under an unknown provider → 404", async () => {
    await expectError(await t.api("POST", `/v1/providers/${UNKNOWN_ID}/clients`, { name: "a", audience: "b" }), 404, "not_found");
  });

  test("list under an unknown provider → 404", async () => {
    await expectError(await t.api("GET", `/v1/providers/${UNKNOWN_ID}/clients`), 404, "not_found");
  });

  for (const [method, body] of [["GET"], ["PATCH", { name: "x" }], ["DELETE"]] as const) {
    test(`${method} a client via another (existing) provider id → 404`, async () => {
      await expectError(await t.api(method, `/v1/providers/${otherProviderId}/clients/${client.id}`, body), 404, "not_found");
    });
    test(`${method} a client via an unknown provider id → 404`, async () => {
      await expectError(await t.api(method, `/v1/providers/${UNKNOWN_ID}/clients/${client.id}`, body), 404, "not_found");
    });
    test(`${method} an unknown client → 404`, async () => {
      await expectError(await t.api(method, `/v1/providers/${providerId}/clients/${UNKNOWN_ID}`, body), 404, "not_found");
    });
    test(`${method} with a malformed clientId → 400 naming clientId`, async () => {
      await expectError(await t.api(method, `/v1/providers/${providerId}/clients/123`, body), 400, "invalid_request", "clientId");
    });
    test(`${method} with a malformed providerId → 400 naming providerId`, async () => {
      await expectError(await t.api(method, `/v1/providers/xyz/clients/${client.id}`, body), 400, "invalid_request", "providerId");
    });
  }

  test("the client is still there after the refused calls", async () => {
    expect(await bodyOf(await t.api("GET", `/v1/providers/${providerId}/clients/${client.id}`))).toEqual(client);
  });

  for (const [query, field] of [
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=abc", "limit"],
    ["cursor=!!", "cursor"],
    ["colour=red", "colour"],
    ["limit=1&limit=2", "'limit' must be given once"],
    ["limit=5&cursor=a&cursor=b", "'cursor' must be given once"],
  ] as const) {
    test(`?${query} → 400 naming '${field}'`, async () => {
      await expectError(await t.api("GET", `/v1/providers/${providerId}/clients?${query}`), 400, "invalid_request", field);
    });
  }
});
