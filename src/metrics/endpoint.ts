/**
 * @module metrics/endpoint
 * The request handler of the separate metrics listener: `GET /metrics` (and `HEAD`) answers the
 * exposition text; another method on that path is a `405 method_not_allowed` naming the allowed
 * ones, and any other path a `404 not_found`, both in the usual `{code, message}` shape.
 * The listener is not the API: it has no auth, no request log and no other route.
 */
import { AppError, toErrorResponse } from "../errors.ts";
import { pathOf } from "../http/route.ts";
import { EXPOSITION_CONTENT_TYPE } from "./registry.ts";

/** The path Prometheus scrapes. */
export const METRICS_PATH = "/metrics";

export function metricsHandler(render: () => string): (request: Request) => Response {
  return (request) => {
    const pathname = pathOf(request.url);
    if (pathname === METRICS_PATH && (request.method === "GET" || request.method === "HEAD")) {
      const headers = { "content-type": EXPOSITION_CONTENT_TYPE, "cache-control": "no-store" };
      return new Response(request.method === "HEAD" ? null : render(), { headers });
    }
    const error =
      pathname === METRICS_PATH
        ? new AppError("method_not_allowed", `${request.method} is not supported on ${METRICS_PATH}; use GET, HEAD.`, { allow: "GET, HEAD" })
        : new AppError("not_found", `This listener serves only GET ${METRICS_PATH}.`);
    const { status, headers, body } = toErrorResponse(error);
    return Response.json(body, { status, headers });
  };
}

/** The same for a `render` that has to wait (the primary of several workers asks each of them). */
export function asyncMetricsHandler(render: () => Promise<string>): (request: Request) => Promise<Response> {
  return async (request) => {
    const wanted = request.method === "GET" && pathOf(request.url) === METRICS_PATH;
    const text = wanted ? await render() : "";
    return metricsHandler(() => text)(request);
  };
}
