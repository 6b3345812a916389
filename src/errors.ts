/**
 * @module errors
 * The one error type of the service and the one table that maps its codes to HTTP status.
 * Codes are part of the public contract (docs/errors.md lists them; a test keeps both in step).
 */

/** Every error code a client can see. */
export type ErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "payload_too_large"
  | "unsupported_media_type"
  | "rate_limited"
  | "internal_error"
  | "unavailable";

/** Status and default message of each code: the only place codes meet HTTP. */
export const ERROR_TABLE: Readonly<Record<ErrorCode, { status: number; message: string }>> = {
  invalid_request: { status: 400, message: "The request is invalid." },
  unauthorized: { status: 401, message: "A valid API key is required: send 'Authorization: Bearer <API key>'." },
  not_found: { status: 404, message: "The resource does not exist." },
  method_not_allowed: { status: 405, message: "This path does not support that method." },
  conflict: { status: 409, message: "The operation conflicts with the current state." },
  payload_too_large: { status: 413, message: "The request body is too large." },
  unsupported_media_type: { status: 415, message: "Send the request body as JSON with 'Content-Type: application/json'." },
  rate_limited: { status: 429, message: "Too many requests; retry later." },
  internal_error: { status: 500, message: "The service failed to handle the request." },
  unavailable: { status: 503, message: "The service is unavailable; retry later." },
};

/** An error meant for the caller: a stable code, a message a person can act on, optional headers. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message?: string, headers: Record<string, string> = {}) {
    super(message ?? ERROR_TABLE[code].message);
    this.name = "AppError";
    this.code = code;
    this.headers = headers;
  }

  /** HTTP status of this error, from the table. */
  get status(): number {
    return ERROR_TABLE[this.code].status;
  }
}

/** The JSON body of every non-2xx answer. */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
}

/**
 * Turns any thrown value into the status, headers and body the caller sees. An AppError below 500
 * is shown as is; anything else becomes a generic internal_error (the detail goes to the log only).
 */
export function toErrorResponse(error: unknown): { status: number; headers: Record<string, string>; body: ErrorBody } {
  if (error instanceof AppError) {
    const exposed = error.status < 500 || error.code === "unavailable";
    return {
      status: error.status,
      headers: { ...error.headers },
      body: { code: error.code, message: exposed ? error.message : ERROR_TABLE[error.code].message },
    };
  }
  return { status: 500, headers: {}, body: { code: "internal_error", message: ERROR_TABLE.internal_error.message } };
}
