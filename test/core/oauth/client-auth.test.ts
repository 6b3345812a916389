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
