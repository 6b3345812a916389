/**
 * @module core/oauth/errors
 * Errors of the OAuth endpoints, answered in the RFC 6749 §5.2 form `{error, error_description}`
 * instead of our `{code, message}`. OAuthError is what the OAuth endpoints throw; every other
 * failure of a request to an OAuth endpoint's path (validation, parse, 405, 413, 503, faults) is
 * mapped onto the same form and keeps its HTTP status. The error handler is the only renderer.
 */
import { AppError, ERROR_TABLE, type ErrorCode } from "../../errors.ts";

/** Every `error` value an OAuth endpoint answers. */
export type OAuthErrorCode =
  | "invalid_request"
  | "invalid_client"
  | "unsupported_grant_type"
  | "invalid_target"
  | "invalid_scope"
  | "unauthorized_client"
  | "server_error"
  | "temporarily_unavailable";

/** Default status and meaning of each OAuth error code (docs/errors.md lists them; a test keeps both in step). */
export const OAUTH_ERROR_TABLE: Readonly<Record<OAuthErrorCode, { status: number; description: string }>> = {
  invalid_request: { status: 400, description: "The request is missing a parameter, repeats one, or is otherwise malformed." },
  invalid_client: { status: 401, description: "Client authentication failed." },
  unsupported_grant_type: { status: 400, description: "Only grant_type=client_credentials is supported." },
  invalid_target: { status: 400, description: "The audience is not the client's audience." },
  invalid_scope: { status: 400, description: "Tokens carry no scope: a scope cannot be granted." },
  unauthorized_client: { status: 400, description: "The client may not do this: it may revoke only tokens issued to it." },
  server_error: { status: 500, description: ERROR_TABLE.internal_error.message },
  temporarily_unavailable: { status: 503, description: ERROR_TABLE.unavailable.message },
};

/** The challenge of every 401 of the token endpoint (RFC 6749 §5.2, RFC 9110 §11.6.1). */
export const BASIC_CHALLENGE = 'Basic realm="tokenmint"';

/** An OAuth error for the caller: RFC 6749 code, description, status (default from the table) and headers. */
export class OAuthError extends Error {
  readonly code: OAuthErrorCode;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: OAuthErrorCode, description?: string, options: { status?: number; headers?: Record<string, string> } = {}) {
    super(description ?? OAUTH_ERROR_TABLE[code].description);
    this.name = "OAuthError";
    this.code = code;
    this.status = options.status ?? OAUTH_ERROR_TABLE[code].status;
    this.headers = options.headers ?? {};
  }
}

/** `invalid_client` (401) with the Basic challenge. */
export const invalidClient = (description: string) => new OAuthError("invalid_client", description, { headers: { "www-authenticate": BASIC_CHALLENGE } });

/** The OAuth code of each of our codes, for failures raised outside the token endpoint's rules. */
const FROM_APP_CODE: Readonly<Record<ErrorCode, OAuthErrorCode>> = {
  invalid_request: "invalid_request",
  unauthorized: "invalid_client",
  not_found: "invalid_request",
  method_not_allowed: "invalid_request",
  conflict: "invalid_request",
  payload_too_large: "invalid_request",
  unsupported_media_type: "invalid_request",
  rate_limited: "temporarily_unavailable",
  internal_error: "server_error",
  unavailable: "temporarily_unavailable",
};

/** The body of every non-2xx answer of an OAuth endpoint. */
export interface OAuthErrorBody {
  error: OAuthErrorCode;
  error_description: string;
}

/** RFC 6749 §5.2 allows only %x20-21 / %x23-5B / %x5D-7E in error_description. */
const sanitize = (text: string) => text.replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, "?");

/**
 * Turns any thrown value on an OAuth path into the status, headers and body the caller sees.
 * An AppError keeps its status and headers (405 keeps `Allow`); faults become a generic
 * server_error. The answer is never cached (RFC 6749 §5.1).
 */
export function toOAuthErrorResponse(error: unknown): { status: number; headers: Record<string, string>; body: OAuthErrorBody } {
  let oauth: OAuthError;
  if (error instanceof OAuthError) oauth = error;
  else if (error instanceof AppError) {
    const exposed = error.status < 500 || error.code === "unavailable";
    oauth = new OAuthError(FROM_APP_CODE[error.code], exposed ? error.message : undefined, { status: error.status, headers: { ...error.headers } });
  } else oauth = new OAuthError("server_error");
  const status = oauth.status;
  const description = status >= 500 && oauth.code === "server_error" ? OAUTH_ERROR_TABLE.server_error.description : oauth.message;
  return {
    status,
    headers: { ...oauth.headers, "cache-control": "no-store", pragma: "no-cache" },
    body: { error: oauth.code, error_description: sanitize(description) },
  };
}
