/**
 * @module http/plugins/error-handler
 * The one place that turns anything thrown (our AppError, store errors, and what Elysia itself
 * raises: validation, parse, not found) into `{code, message}` with the status from the error
 * table. On the paths of the OAuth routes (route.ts takesOAuthErrors) the same failures take the
 * RFC 6749 §5.2 form `{error, error_description}` instead (core/oauth/errors.ts); an unknown path
 * under /oauth/ is an unknown route like any other. Unknown errors become a generic
 * 500; their detail goes only to the log.
 */
import { Elysia, ValidationError } from "elysia";
import { toOAuthErrorResponse } from "../../core/oauth/errors.ts";
import { AppError, ERROR_TABLE, toErrorResponse } from "../../errors.ts";
import type { Logger } from "../../logging/logger.ts";
import { StoreError } from "../../store/store.ts";
import { isOAuthPath, matchPath, pathOf, takesOAuthErrors, type RouteDef } from "../route.ts";

interface ValueErrorLike {
  path: string;
  message: string;
  schema?: { errorMessage?: string };
}

const WHERE = { body: "field", params: "path parameter", query: "query parameter", headers: "header" } as const;

/**
 * A message a person can act on for a request validation failure, naming the field (a form body's
 * fields are called parameters, as RFC 6749 does).
 */
export function describeValidation(error: ValidationError, form = false): string {
  const where = form && error.type === "body" ? "parameter" : (WHERE[error.type as keyof typeof WHERE] ?? "value");
  const first = (error.all as ValueErrorLike[])[0];
  if (first === undefined) return "The request is invalid.";
  // A JSON pointer (RFC 6901): "" is the whole value, "/" a member named "", "~1" a "/" and "~0" a "~".
  const segments = first.path === "" ? [] : first.path.slice(1).split("/").map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"));
  const name = segments.join(".");
  if (first.message === "Unexpected property") return `Unknown ${where} '${name}'.`;
  if (first.message === "Expected required property") return `Missing required ${where} '${name}'.`;
  if (segments.length === 0) return "The request body must be a JSON object.";
  const detail = first.schema?.errorMessage ?? first.message.charAt(0).toLowerCase() + first.message.slice(1);
  return `Invalid ${where} '${name}': ${detail}.`;
}

/** Maps a thrown value to an AppError (or leaves it unknown for a 500). */
export function toAppError(error: unknown, code: string, method: string, url: string, routes: readonly RouteDef[]): AppError | unknown {
  if (error instanceof AppError) return error;
  if (error instanceof StoreError) {
    if (error.kind === "not_found") return new AppError("not_found", `${error.message.charAt(0).toUpperCase()}${error.message.slice(1)}.`);
    if (error.kind === "unavailable") return new AppError("unavailable", ERROR_TABLE.unavailable.message);
    return new AppError("conflict", `${error.message.charAt(0).toUpperCase()}${error.message.slice(1)}.`);
  }
  if (error instanceof ValidationError && error.type !== "response") {
    return new AppError("invalid_request", describeValidation(error, isOAuthPath(pathOf(url))));
  }
  if (code === "PARSE") {
    // Elysia wraps whatever the body parser throws (413, 415, bad JSON) in its ParseError.
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof AppError ? cause : new AppError("invalid_request", "The request body is not valid JSON.");
  }
  if (code === "NOT_FOUND") {
    const pathname = pathOf(url);
    const known = matchPath(routes, pathname);
    if (known !== undefined) {
      // A GET route answers HEAD too (RFC 9110 §9.3.2).
      const allowed = known.methods.includes("GET") ? [...known.methods, "HEAD"] : known.methods;
      return new AppError("method_not_allowed", `${method} is not supported on ${known.path}; use ${allowed.join(", ")}.`, {
        allow: allowed.join(", "),
      });
    }
    return new AppError("not_found", `No route matches ${method} ${pathname}.`);
  }
  return error;
}

/**
 * The stack of a fault, fit for the log. A response that breaks its schema (stored data that was
 * changed or damaged) is told by where, never by the values Elysia's message quotes: those are
 * the record's names, ids and audiences.
 */
export function loggableStack(error: Error): string | undefined {
  if (!(error instanceof ValidationError)) return error.stack;
  const at = (error.all as ValueErrorLike[])[0]?.path ?? "";
  const frames = (error.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line));
  return [`ValidationError: the ${error.type} does not match its schema at '${at}'`, ...frames].join("\n");
}

/** An error's answer: status, headers and body. */
export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * The answer to `error`, thrown while answering `request` (Elysia's error `code`, or `UNKNOWN`),
 * in the form its path takes; a 5xx not chosen by the service is logged with its stack. The error hook and the direct lane
 * (http/direct.ts) both answer through this.
 */
export function errorAnswer(logger: Logger, routes: readonly RouteDef[], error: unknown, code: string, request: Request, route: string | undefined): ErrorAnswer {
  const mapped = toAppError(error, code, request.method, request.url, routes);
  const answer = takesOAuthErrors(routes, pathOf(request.url)) ? toOAuthErrorResponse(mapped) : toErrorResponse(mapped);
  // A fault (and a store that cannot be reached) is logged with its stack; a 503 the service chose
  // itself (while draining, which is logged once, or while not ready) is not logged per request.
  // The error logged is the one thrown, not its answer: a store's reason (a full disk) is told there.
  if (answer.status >= 500 && !(error instanceof AppError)) {
    logger.error("request failed", {
      method: request.method,
      route: route || undefined,
      status: answer.status,
      error: error instanceof Error ? error.name : "unknown",
      stack: error instanceof Error ? loggableStack(error) : undefined,
    });
  }
  return { ...answer, headers: { ...answer.headers, "content-type": "application/json" } };
}

export const errorHandler = (logger: Logger, routes: readonly RouteDef[]) =>
  new Elysia({ name: "error-handler" }).onError({ as: "global" }, ({ code, error, request, set, route }) => {
    const { status, headers, body } = errorAnswer(logger, routes, error, String(code), request, route);
    set.status = status;
    Object.assign(set.headers, headers);
    return body;
  });
