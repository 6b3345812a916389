/**
 * @module http/plugins/request-log
 * One info line per management request: method, route pattern, status, duration. Never bodies,
 * header values, ids, names, addresses or tokens. Discovery and health requests write nothing.
 *
 * The same hook records the HTTP metrics of every request, logged or not (discovery and health
 * included): a counter by method, route pattern and status, and a duration histogram.
 */
import { Elysia } from "elysia";
import type { Logger } from "../../logging/logger.ts";
import { methodLabel, type ServiceMetrics } from "../../metrics/service-metrics.ts";
import { matchPath, type RouteDef } from "../route.ts";
import { HEALTH_PATHS } from "../routes/health.ts";

/** Paths that are never logged (CONTRACT §4, §5): discovery and health. */
export const isUnloggedPath = (pathname: string) => pathname.startsWith("/.well-known/") || HEALTH_PATHS.has(pathname);

/**
 * The path of a request target that makes no URL (a bad Host): only to tell whether it is one
 * never logged; it is never logged itself.
 */
export const rawPathOf = (target: string) => {
  const path = target.startsWith("/") ? target : target.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, "");
  const end = path.search(/[?#]/);
  return end === -1 ? path : path.slice(0, end);
};

/** The route label of paths no route matches. */
export const UNMATCHED_ROUTE = "(unmatched)";

/** What the request log records into; only the HTTP metrics. */
export type HttpMetrics = Pick<ServiceMetrics, "httpRequests" | "httpDuration">;

/** Counts one answered request and its duration. */
function recordRequest(metrics: HttpMetrics, method: string, route: string, status: number, elapsedMs: number | undefined): void {
  const label = methodLabel(method);
  metrics.httpRequests.inc({ method: label, route, status: String(status) });
  if (elapsedMs !== undefined) metrics.httpDuration.observe({ method: label, route }, elapsedMs / 1000);
}

/**
 * Records one answered request: its HTTP metrics, and its log line unless its path is never
 * logged. The request log's hook and the direct lane (http/direct.ts) both go through this.
 */
export function logRequest(
  logger: Logger,
  metrics: HttpMetrics | undefined,
  method: string,
  route: string,
  pathname: string,
  status: number,
  elapsedMs: number | undefined,
): void {
  if (metrics !== undefined) recordRequest(metrics, method, route, status, elapsedMs);
  if (isUnloggedPath(pathname)) return;
  logger.info("request", { method, route, status, durationMs: elapsedMs === undefined ? undefined : Math.round(elapsedMs * 1000) / 1000 });
}

export const requestLog = (logger: Logger, routes: readonly RouteDef[], metrics?: HttpMetrics, now: () => number = () => performance.now()) => {
  const started = new WeakMap<Request, number>();
  const patterns = new Set(routes.map((r) => r.path));
  // Only patterns of our table ever become a label: a raw path would carry ids.
  const routeOf = (route: string, path: string) => (patterns.has(route) ? route : (matchPath(routes, path)?.path ?? UNMATCHED_ROUTE));
  return new Elysia({ name: "request-log" })
    .onRequest(({ request }) => {
      started.set(request, now());
    })
    .onAfterResponse({ as: "global" }, ({ request, route, set, path, responseValue }) => {
      const start = started.get(request);
      const elapsedMs = start === undefined ? undefined : now() - start;
      // A handler that returns a Response (discovery, 304) sets its status there, not on `set`.
      const status = responseValue instanceof Response ? responseValue.status : typeof set.status === "number" ? set.status : 200;
      // A request refused before routing (401, 503) still gets its pattern, never its raw path.
      logRequest(logger, metrics, request.method, routeOf(route, path), path, status, elapsedMs);
    });
};
