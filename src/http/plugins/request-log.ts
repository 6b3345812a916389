/**
 * @module http/plugins/request-log
 * One info line per management request: method, route pattern, status, duration. Never bodies,
 * header values, ids, names, addresses or tokens. Discovery and health requests write nothing.
 */
import { Elysia } from "elysia";
import type { Logger } from "../../logging/logger.ts";
import { matchPath, type RouteDef } from "../route.ts";

/** Paths that are never logged (CONTRACT §4, §5). */
export const isUnloggedPath = (pathname: string) => pathname.startsWith("/.well-known/") || pathname === "/healthz" || pathname === "/readyz";

export const requestLog = (logger: Logger, routes: readonly RouteDef[], now: () => number = () => performance.now()) => {
  const started = new WeakMap<Request, number>();
  return new Elysia({ name: "request-log" })
    .onRequest(({ request }) => {
      started.set(request, now());
    })
    .onAfterResponse({ as: "global" }, ({ request, route, set, path }) => {
      if (isUnloggedPath(path)) return;
      const start = started.get(request);
      logger.info("request", {
        method: request.method,
        // A request refused before routing (401, 503) still logs its pattern, never its raw path.
        route: route || matchPath(routes, path)?.path || "(unmatched)",
        status: typeof set.status === "number" ? set.status : 200,
        durationMs: start === undefined ? undefined : Math.round((now() - start) * 1000) / 1000,
      });
    });
};
