/** CONTRACT §2: /v1/providers — success shapes, paging, name/description rules, path and query errors. */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { base64url } from "jose";
import { buildTestApp, T0, type TestApp } from "../helpers/app.ts";
import { bodyOf, expectError, ISO_RE, json, UNKNOWN_ID, UUID_RE } from "./support.ts";

interface Provider {
  id: string;
  name: string;
  description: string;
  createdAt: string;
}
interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

const create = async (t: TestApp, body: unknown) => {
  const res = await t.api("POST", "/v1/providers", body);
  expect(res.status).toBe(201);
  return json<Provider>(res);
};

describe("providers: success shapes", () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await buildTestApp();
  });
  afterEach(() => t.close());

  test("POST answers 201 with exactly {id, name, description, createdAt}", async () => {
    const res = await t.api("POST", "/v1/providers", { name: "payments", description: "Card payments" });
    expect(res.status).toBe(201);
    const body = await json<Provider>(res);
    expect(Object.keys(body).sort()).toEqual(["createdAt", "description", "id", "name"]);
    expect(body.id).toMatch(UUID_RE);
    expect(body).toEqual({ id: body.id, name: "payments", description: "Card payments", createdAt: new Date(T0).toISOString() });
    expect(body.createdAt).toMatch(ISO_RE);
  });

  test("description defaults to the empty string", async () => {
    expect((await create(t, { name: "p" })).description).toBe("");
  });

  test("GET one returns what POST returned", async () => {
    const created = await create(t, { name: "payments", description: "d" });
    const res = await t.api("GET", `/v1/providers/${created.id}`);
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual(created);
  });

  test("list returns {items, nextCursor} with nextCursor null when everything fits", async () => {
    const a = await create(t, { name: "a" });
    t.clock.advance(1);
    const b = await create(t, { name: "b" });
    const res = await t.api("GET", "/v1/providers");
    expect(res.status).toBe(200);
    const page = await json<Page<Provider>>(res);
    expect(Object.keys(page).sort()).toEqual(["items", "nextCursor"]);
    expect(page).toEqual({ items: [a, b], nextCursor: null });
  });

  test("limit=1 pages through 3 providers oldest first, following nextCursor until null", async () => {
    const created: Provider[] = [];
    for (const name of ["one", "two", "three"]) {
      created.push(await create(t, { name }));
      t.clock.advance(1);
    }
    const pages: Page<Provider>[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? "limit=1" : `limit=1&cursor=${encodeURIComponent(cursor)}`;
      const res = await t.api("GET", `/v1/providers?${query}`);
      expect(res.status).toBe(200);
      const page: Page<Provider> = await json<Page<Provider>>(res);
      pages.push(page);
      cursor = page.nextCursor;
    } while (cursor !== null && pages.length < 10);
    expect(pages.map((p) => p.items.length)).toEqual([1, 1, 1]);
    expect(pages.flatMap((p) => p.items)).toEqual(created);
    expect(pages.slice(0, 2).every((p) => typeof p.nextCursor === "string")).toBe(true);
  });

  test("providers created within one millisecond list, and page, in the order they were created", async () => {
    const created: Provider[] = [];
    for (let i = 0; i < 40; i++) created.push(await create(t, { name: `p${i}` }));
    const listed = await json<Page<Provider>>(await t.api("GET", "/v1/providers"));
    expect(listed.items.map((p) => p.name)).toEqual(created.map((p) => p.name));
    // A page that ends within the millisecond, then one created after it: the walk meets it last.
    const first = await json<Page<Provider>>(await t.api("GET", "/v1/providers?limit=20"));
    const late = await create(t, { name: "late" });
    const rest = await json<Page<Provider>>(await t.api("GET", `/v1/providers?limit=100&cursor=${encodeURIComponent(first.nextCursor as string)}`));
    expect([...first.items, ...rest.items].map((p) => p.name)).toEqual([...created, late].map((p) => p.name));
  });

  test("a cursor whose id is spelt in capitals continues where the cursor it came from does", async () => {
    const created: Provider[] = [];
    for (const name of ["one", "two", "three"]) {
      created.push(await create(t, { name }));
      t.clock.advance(1);
    }
    const first = await json<Page<Provider>>(await t.api("GET", "/v1/providers?limit=1"));
    const id = new TextDecoder().decode(base64url.decode(first.nextCursor as string));
    const upper = base64url.encode(new TextEncoder().encode(id.toUpperCase()));
    expect(upper).not.toBe(first.nextCursor);
    const res = await t.api("GET", `/v1/providers?limit=1&cursor=${upper}`);
    expect(res.status).toBe(200);
    expect((await json<Page<Provider>>(res)).items).toEqual([created[1] as Provider]);
  });

  test("PATCH changes only the fields sent and answers 200 with the provider", async () => {
    const created = await create(t, { name: "old", description: "keep" });
    const res = await t.api("PATCH", `/v1/providers/${created.id}`, { name: "  new  " });
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual({ ...created, name: "new" });
    const res2 = await t.api("PATCH", `/v1/providers/${created.id}`, { description: "changed" });
    expect(await bodyOf(res2)).toEqual({ ...created, name: "new", description: "changed" });
    expect(await bodyOf(await t.api("GET", `/v1/providers/${created.id}`))).toEqual({ ...created, name: "new", description: "changed" });
  });

  test("PATCH with no field answers the provider as it is and writes nothing", async () => {
    const created = await create(t, { name: "same", description: "kept" });
    const stored = await t.ctx.store.getProvider(t.ctx.projectId, created.id);
    t.clock.advance(5);
    const res = await t.api("PATCH", `/v1/providers/${created.id}`, {});
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual(created);
    expect(await bodyOf(await t.api("GET", `/v1/providers/${created.id}`))).toEqual(created);
    expect(await t.ctx.store.getProvider(t.ctx.projectId, created.id)).toEqual(stored);
    await expectError(await t.api("PATCH", `/v1/providers/${UNKNOWN_ID}`, {}), 404, "not_found");
  });

  test("DELETE answers 204 with no body, then GET is 404", async () => {
    const created = await create(t, { name: "gone" });
    const res = await t.api("DELETE", `/v1/providers/${created.id}`);
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    await expectError(await t.api("GET", `/v1/providers/${created.id}`), 404, "not_found");
    await expectError(await t.api("DELETE", `/v1/providers/${created.id}`), 404, "not_found");
  });

  test("DELETE while a client exists is 409 conflict, and the provider stays", async () => {
    const created = await create(t, { name: "busy" });
    const client = await t.api("POST", `/v1/providers/${created.id}/clients`, { name: "c", audience: "aud" });
    expect(client.status).toBe(201);
    await expectError(await t.api("DELETE", `/v1/providers/${created.id}`), 409, "conflict");
    expect((await t.api("GET", `/v1/providers/${created.id}`)).status).toBe(200);
  });
});

describe("providers: field rules", () => {
  let t: TestApp;
  let existing: Provider;
  beforeAll(async () => {
    t = await buildTestApp();
    existing = await create(t, { name: "existing" });
  });
  afterAll(() => t.close());

  test("name is trimmed before it is stored", async () => {
    expect((await create(t, { name: " a " })).name).toBe("a");
  });

  test("200 characters after trimming are accepted", async () => {
    expect((await create(t, { name: ` ${"x".repeat(200)} ` })).name).toBe("x".repeat(200));
  });

  test("characters are counted as Unicode code points: 200 emoji (400 UTF-16 units) are a name, 201 are not", async () => {
    const emoji = "\u{1F600}";
    expect((await create(t, { name: emoji.repeat(200), description: emoji.repeat(1000) })).name).toBe(emoji.repeat(200));
    await expectError(await t.api("POST", "/v1/providers", { name: emoji.repeat(201) }), 400, "invalid_request", "name");
    await expectError(await t.api("POST", "/v1/providers", { name: "e", description: emoji.repeat(1001) }), 400, "invalid_request", "description");
  });

  const badNames: [string, Record<string, unknown>][] = [
    ["missing", {}],
    ["empty", { name: "" }],
    ["only spaces", { name: "    " }],
    ["201 characters", { name: "x".repeat(201) }],
    ["a C0 control character", { name: "a\u0001b" }],
    ["DEL", { name: "a\u007fb" }],
    ["a number", { name: 42 }],
    ["null", { name: null }],
  ];
  for (const [label, body] of badNames) {
    test(`name ${label} → 400 naming 'name' (create and patch)`, async () => {
      await expectError(await t.api("POST", "/v1/providers", body), 400, "invalid_request", "name");
      if ("name" in body) await expectError(await t.api("PATCH", `/v1/providers/${existing.id}`, body), 400, "invalid_request", "name");
    });
  }

  test("description of 1000 characters is accepted, 1001 is 400 naming 'description'", async () => {
    expect((await create(t, { name: "d", description: "x".repeat(1000) })).description).toHaveLength(1000);
    await expectError(await t.api("POST", "/v1/providers", { name: "d", description: "x".repeat(1001) }), 400, "invalid_request", "description");
    await expectError(await t.api("PATCH", `/v1/providers/${existing.id}`, { description: "x".repeat(1001) }), 400, "invalid_request", "description");
  });

  test("description null or with a control character is 400", async () => {
    await expectError(await t.api("POST", "/v1/providers", { name: "d", description: null }), 400, "invalid_request", "description");
    await expectError(await t.api("POST", "/v1/providers", { name: "d", description: "a\nb" }), 400, "invalid_request", "description");
  });

  test("an unknown body field is 400 naming it", async () => {
    await expectError(await t.api("POST", "/v1/providers", { name: "a", colour: "red" }), 400, "invalid_request", "colour");
    await expectError(await t.api("PATCH", `/v1/providers/${existing.id}`, { colour: "red" }), 400, "invalid_request", "colour");
  });

  test("a body that is not an object is 400", async () => {
    await expectError(await t.api("POST", "/v1/providers", [{ name: "a" }]), 400, "invalid_request");
    await expectError(await t.api("POST", "/v1/providers", "\"a\"", { "content-type": "application/json" }), 400, "invalid_request");
  });

  test("nothing invalid was stored", async () => {
    const page = await json<Page<Provider>>(await t.api("GET", "/v1/providers?limit=100"));
    expect(page.items.every((p) => p.name === p.name.trim() && [...p.name].length >= 1 && [...p.name].length <= 200)).toBe(true);
  });
});

describe("providers: path and query", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(() => t.close());

  for (const [method, body] of [["GET"], ["PATCH", { name: "x" }], ["DELETE"]] as const) {
    test(`${method} with a malformed UUID is 400 naming providerId`, async () => {
      await expectError(await t.api(method, "/v1/providers/not-a-uuid", body), 400, "invalid_request", "providerId");
    });
    test(`${method} with an unknown, well-formed UUID is 404`, async () => {
      await expectError(await t.api(method, `/v1/providers/${UNKNOWN_ID}`, body), 404, "not_found");
    });
  }

  const badQueries: [string, string][] = [
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=abc", "limit"],
    ["limit=", "limit"],
    ["cursor=!!", "cursor"],
    ["cursor=bm90LWEtdXVpZA", "cursor"],
    ["colour=red", "colour"],
  ];
  for (const [query, field] of badQueries) {
    test(`?${query} is 400 naming '${field}'`, async () => {
      await expectError(await t.api("GET", `/v1/providers?${query}`), 400, "invalid_request", field);
    });
  }

  test("limit=1 and limit=100 are accepted", async () => {
    expect((await t.api("GET", "/v1/providers?limit=1")).status).toBe(200);
    expect((await t.api("GET", "/v1/providers?limit=100")).status).toBe(200);
  });
});
