/**
 * @module http/plugins/auth
 * Authenticates every /v1 request before its body is read, so a caller without a valid API key
 * learns nothing about the request's shape. The principal is kept per request for the handlers.
 */
import { Elysia } from "elysia";
import { authenticate, type Principal } from "../../core/api-keys.ts";
import type { AppContext } from "../../context.ts";
import { AppError } from "../../errors.ts";
import { pathOf } from "../route.ts";
import { HEALTH_PATHS } from "../routes/health.ts";

/** Principals of in-flight requests; one map per app, never global. */
export type Principals = WeakMap<Request, Principal>;

export const isManagementPath = (pathname: string) => pathname === "/v1" || pathname.startsWith("/v1/");

/**
 * Requests the direct lane took before the process began to drain and handed to the app after
 * (http/direct.ts: a refusal, found once the body was read): they are in flight, and get their
 * own answer rather than the draining 503.
 */
const admitted = new WeakSet<Request>();

/** Marks `request` as taken before draining began (see `admitted`); returns it. */
export function admitInFlight(request: Request): Request {
  admitted.add(request);
  return request;
}

export const auth = (ctx: AppContext, principals: Principals) =>
  new Elysia({ name: "auth" }).onRequest(async ({ request }) => {
    const path = pathOf(request.url);
    // The connection closes with this answer, so a keep-alive client retries on a new one, not into a reset.
    if (ctx.draining && !HEALTH_PATHS.has(path) && !admitted.has(request)) {
      throw new AppError("unavailable", "The service is shutting down; retry on another instance or shortly.", { "retry-after": "1", connection: "close" });
    }
    if (!isManagementPath(path)) return;
    principals.set(request, await authenticate(ctx.store, request.headers.get("authorization"), ctx.clock.now()));
  });
