/** core/oauth/errors: every failure on an OAuth path becomes `{error, error_description}`. */
import { describe, expect, test } from "bun:test";
import { OAuthError, OAUTH_ERROR_TABLE, toOAuthErrorResponse } from "../../../src/core/oauth/errors.ts";
import { AppError, ERROR_TABLE } from "../../../src/errors.ts";

const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" };

describe("toOAuthErrorResponse", () => {
  test("an OAuthError keeps its code, status, description and headers", () => {
    const error = new OAuthError("invalid_client", "nope", { headers: { "www-authenticate": "Basic" } });
    expect(toOAuthErrorResponse(error)).toEqual({
      status: 401,
      headers: { "www-authenticate": "Basic", ...NO_STORE },
      body: { error: "invalid_client", error_description: "nope" },
    });
    expect(toOAuthErrorResponse(new OAuthError("invalid_target")).body).toEqual({ error: "invalid_target", error_description: OAUTH_ERROR_TABLE.invalid_target.description });
  });

  test("our errors keep their status and headers and become invalid_request, or the matching OAuth code", () => {
    const cases: [AppError, number, string][] = [
      [new AppError("invalid_request", "Missing required parameter 'grant_type'."), 400, "invalid_request"],
      [new AppError("not_found", "No route."), 404, "invalid_request"],
      [new AppError("method_not_allowed", "Use POST.", { allow: "POST" }), 405, "invalid_request"],
      [new AppError("payload_too_large"), 413, "invalid_request"],
      [new AppError("unsupported_media_type"), 415, "invalid_request"],
      [new AppError("unauthorized"), 401, "invalid_client"],
      [new AppError("rate_limited", undefined, { "retry-after": "5" }), 429, "temporarily_unavailable"],
      [new AppError("unavailable", "Shutting down.", { "retry-after": "1" }), 503, "temporarily_unavailable"],
    ];
    for (const [error, status, code] of cases) {
      const response = toOAuthErrorResponse(error);
      expect(response).toEqual({ status, headers: { ...error.headers, ...NO_STORE }, body: { error: code as never, error_description: error.message } });
    }
  });

  test("a fault, or an AppError of 500, is a generic server_error", () => {
    for (const error of [new Error("secret detail"), "thrown string", new AppError("internal_error", "secret detail")]) {
      expect(toOAuthErrorResponse(error)).toEqual({ status: 500, headers: NO_STORE, body: { error: "server_error", error_description: ERROR_TABLE.internal_error.message } });
    }
  });

  test("error_description keeps to the characters RFC 6749 §5.2 allows", () => {
    const { body } = toOAuthErrorResponse(new AppError("not_found", 'No route matches GET /oauth/"a"\\b\u00e9\n.'));
    expect(body.error_description).toBe("No route matches GET /oauth/?a??b??.");
    expect(body.error_description).toMatch(/^[\x20\x21\x23-\x5b\x5d-\x7e]+$/);
  });
});
