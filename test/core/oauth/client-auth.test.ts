/** core/oauth/client-auth: reading client_secret_basic and client_secret_post credentials. */
import { describe, expect, test } from "bun:test";
import { parseBasicCredentials, readClientCredentials } from "../../../src/core/oauth/client-auth.ts";
import { OAuthError } from "../../../src/core/oauth/errors.ts";

const ID = "019b76da-a800-7e50-824c-20b312d17a69";
const SECRET = "tms_gHJBRCv2IGH95rTuz7XfjH_pvI80PNtIFVc7t5GgGeA";
const basic = (raw: string) => `Basic ${Buffer.from(raw).toString("base64")}`;

/** The OAuth error `run` throws: code, status and challenge. */
function refusal(run: () => unknown): { code: string; status: number; challenge?: string } {
  try {
    run();
  } catch (error) {
    if (!(error instanceof OAuthError)) throw error;
    return { code: error.code, status: error.status, challenge: error.headers["www-authenticate"] };
  }
  throw new Error("expected an OAuthError");
}
const INVALID_CLIENT = { code: "invalid_client", status: 401, challenge: 'Basic realm="tokenmint"' };

describe("parseBasicCredentials", () => {
  test("decodes base64, splits at the first colon, and form-decodes both halves", () => {
    expect(parseBasicCredentials(basic(`${ID}:${SECRET}`))).toEqual({ clientId: ID, secret: SECRET });
    expect(parseBasicCredentials(basic("a%3Ab:c%3Ad:e"))).toEqual({ clientId: "a:b", secret: "c:d:e" });
    expect(parseBasicCredentials(basic("a+b:%2B%20"))).toEqual({ clientId: "a b", secret: "+ " });
    expect(parseBasicCredentials(`bAsIc   ${Buffer.from("x:y").toString("base64")}  `)).toEqual({ clientId: "x", secret: "y" });
  });

  for (const [name, header] of [
    ["another scheme", `Bearer ${Buffer.from("x:y").toString("base64")}`],
    ["no token", "Basic "],
    ["base64 of the wrong length", "Basic eDp5e"],
    ["characters outside base64", "Basic eDp5*A=="],
    ["no colon", basic("xy")],
    ["empty id", basic(":y")],
    ["empty secret", basic("x:")],
    ["bad percent-encoding", basic("x:%E0%A4%A")],
  ] as const) {
    test(`refuses ${name} with invalid_client and the Basic challenge`, () => {
      expect(refusal(() => parseBasicCredentials(header))).toEqual(INVALID_CLIENT);
    });
  }
});

describe("readClientCredentials", () => {
  test("client_secret_basic, with or without the same client_id in the body", () => {
    expect(readClientCredentials(basic(`${ID}:${SECRET}`), {})).toEqual({ method: "client_secret_basic", clientId: ID, secret: SECRET });
    expect(readClientCredentials(basic(`${ID}:${SECRET}`), { client_id: ID })).toEqual({ method: "client_secret_basic", clientId: ID, secret: SECRET });
  });

  test("client_secret_post", () => {
    expect(readClientCredentials(null, { client_id: ID, client_secret: SECRET })).toEqual({ method: "client_secret_post", clientId: ID, secret: SECRET });
  });

  test("both methods, or a differing client_id, is invalid_request (400, no challenge)", () => {
    const badRequest = { code: "invalid_request", status: 400, challenge: undefined };
    expect(refusal(() => readClientCredentials(basic(`${ID}:${SECRET}`), { client_secret: SECRET }))).toEqual(badRequest);
    expect(refusal(() => readClientCredentials(basic(`${ID}:${SECRET}`), { client_id: ID, client_secret: SECRET }))).toEqual(badRequest);
    expect(refusal(() => readClientCredentials(basic(`${ID}:${SECRET}`), { client_id: "other" }))).toEqual(badRequest);
  });

  test("no credentials, or half of the post ones, is invalid_client", () => {
    expect(refusal(() => readClientCredentials(null, {}))).toEqual(INVALID_CLIENT);
    expect(refusal(() => readClientCredentials(null, { client_id: ID }))).toEqual(INVALID_CLIENT);
    expect(refusal(() => readClientCredentials(null, { client_secret: SECRET }))).toEqual(INVALID_CLIENT);
  });
});

describe("readClientCredentials: private_key_jwt", () => {
  const TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
  const segment = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  /** An unsigned-looking JWT: reading credentials never verifies, it only finds the claimed client. */
  const jwt = (claims: Record<string, unknown>) => `${segment({ alg: "ES256" })}.${segment(claims)}.c2ln`;
  const ASSERTION = jwt({ iss: ID, sub: ID });

  test("reads the client id from iss = sub; a repeated client_id must match", () => {
    expect(readClientCredentials(null, { client_assertion_type: TYPE, client_assertion: ASSERTION })).toEqual({ method: "private_key_jwt", clientId: ID, assertion: ASSERTION });
    expect(readClientCredentials(null, { client_id: ID, client_assertion_type: TYPE, client_assertion: ASSERTION })).toEqual({
      method: "private_key_jwt",
      clientId: ID,
      assertion: ASSERTION,
    });
  });

  test("with Basic or client_secret, half of the parameters, another type or another client_id: invalid_request", () => {
    const badRequest = { code: "invalid_request", status: 400, challenge: undefined };
    const both = { client_assertion_type: TYPE, client_assertion: ASSERTION };
    expect(refusal(() => readClientCredentials(basic(`${ID}:${SECRET}`), both))).toEqual(badRequest);
    expect(refusal(() => readClientCredentials(null, { ...both, client_id: ID, client_secret: SECRET }))).toEqual(badRequest);
    expect(refusal(() => readClientCredentials(null, { client_assertion: ASSERTION }))).toEqual(badRequest);
    expect(refusal(() => readClientCredentials(null, { client_assertion_type: TYPE }))).toEqual(badRequest);
    expect(refusal(() => readClientCredentials(null, { client_assertion_type: "urn:other", client_assertion: ASSERTION }))).toEqual(badRequest);
    expect(refusal(() => readClientCredentials(null, { ...both, client_id: "other" }))).toEqual(badRequest);
  });

  test("an assertion that is not a JWT, or whose iss and sub differ or are missing, is invalid_client", () => {
    for (const assertion of ["x", "a.b.c", jwt({ iss: ID }), jwt({ sub: ID }), jwt({ iss: "other", sub: ID }), jwt({ iss: 1, sub: 1 }), jwt({ iss: "", sub: "" })]) {
      expect(refusal(() => readClientCredentials(null, { client_assertion_type: TYPE, client_assertion: assertion }))).toEqual(INVALID_CLIENT);
    }
  });
});
