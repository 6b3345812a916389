/**
 * @module app
 * buildApp(ctx): the HTTP application. Registers the parser, the error handler, request logging
 * and authentication, then every route of the table. It never listens and never reads the
 * environment; main.ts does that.
 */
import { Type } from "@sinclair/typebox";
import { Elysia } from "elysia";
import type { AppContext } from "./context.ts";
import { openApiDocument } from "./http/openapi.ts";
import { directLane } from "./http/direct.ts";
import { NO_PRINCIPAL, type Principal } from "./core/api-keys.ts";
import { auth, isManagementPath, type Principals } from "./http/plugins/auth.ts";
import { bodyParser } from "./http/plugins/body-parser.ts";
import { errorAnswer, errorHandler } from "./http/plugins/error-handler.ts";
import { logRequest, rawPathOf, requestLog, UNMATCHED_ROUTE } from "./http/plugins/request-log.ts";
import { hasUsableUrl, matchPath, type RouteDef, type RouteInput, UNUSABLE_HOST_MESSAGE } from "./http/route.ts";
import { HEALTH_PATHS, healthRoutes } from "./http/routes/health.ts";
import { oauthRoutes } from "./http/routes/oauth.ts";
import { clientJwksRoutes } from "./http/routes/v1/client-jwks.ts";
import { clientSecretRoutes } from "./http/routes/v1/client-secrets.ts";
import { clientRoutes } from "./http/routes/v1/clients.ts";
import { keyRoutes } from "./http/routes/v1/keys.ts";
import { projectRoutes } from "./http/routes/v1/project.ts";
import { providerRoutes } from "./http/routes/v1/providers.ts";
import { tokenRoutes } from "./http/routes/v1/tokens.ts";
import { wellKnownRoutes } from "./http/routes/well-known.ts";
import { canonicalParams } from "./core/ids.ts";
import { EmptyBody } from "./schemas/common.ts";
import { AppError } from "./errors.ts";
import { VERSION } from "./version.ts";

/** A query parameter given twice is ambiguous (which one counts?): refused, naming it. */
function refuseRepeatedQuery(url: string): void {
  const seen = new Set<string>();
  for (const name of new URL(url).searchParams.keys()) {
    if (seen.has(name)) throw new AppError("invalid_request", `Query parameter '${name}' must be given once.`);
    seen.add(name);
  }
}

/** The query of a management route that takes none: no parameter at all. */
const NO_QUERY = Type.Object({}, { additionalProperties: false });

/** Every route of the service, in registration order. */
export function routeTable(ctx: AppContext): RouteDef[] {
  const table: RouteDef[] = [
    ...providerRoutes(ctx),
    ...clientRoutes(ctx),
    ...clientSecretRoutes(ctx),
    ...clientJwksRoutes(ctx),
    ...tokenRoutes(ctx),
    ...keyRoutes(ctx),
    ...projectRoutes(ctx),
    ...oauthRoutes(ctx),
    ...wellKnownRoutes(ctx),
    ...healthRoutes(ctx),
  ];
  // The document describes the whole table, its own route included. It is built when first asked
  // for, not at start-up, where it cost a starting server about 11 ms before it could listen.
  let document: string | undefined;
  table.push({
    method: "GET",
    path: "/openapi.json",
    operationId: "getOpenApiDocument",
    summary: "This API's OpenAPI 3.1 document",
    tag: "meta",
    auth: false,
    success: {
      status: 200,
      description: "The OpenAPI document.",
      documents: {
        schema: Type.Object({ openapi: Type.String({ description: "`3.1.0`." }) }, { additionalProperties: true, description: "An OpenAPI 3.1 document." }),
        contentType: "application/json",
      },
    },
    errors: [],
    handler: () => {
      document ??= JSON.stringify(openApiDocument(table, VERSION));
      return new Response(document, { headers: { "content-type": "application/json" } });
    },
  });
  return table;
}

/**
 * The caller a route's handler gets: the API key's, which the auth hook set for every /v1 path.
 * A /v1 route without one would be a request the hook let through: never served as nobody's.
 */
function principalOf(principals: Principals, request: Request, needsKey: boolean): Principal {
  const principal = principals.get(request);
  if (principal !== undefined || !needsKey) return principal ?? NO_PRINCIPAL;
  throw new Error("a /v1 route was reached without an authenticated API key");
}

export function buildApp(ctx: AppContext, routes: RouteDef[] = routeTable(ctx)) {
  const principals: Principals = new WeakMap();
  // The router takes a request's path from its URL as Bun.serve gives it (`http://` + the Host
  // header): it is found after the scheme alone (`standardHostname: false`). Elysia's default
  // skips the first 11 characters, so a Host of one to three characters shifted the path the
  // router saw away from the one every check of the request reads.
  const app = new Elysia({ normalize: false, aot: true, handler: { standardHostname: false } })
    .use(errorHandler(ctx.logger, routes))
    .use(requestLog(ctx.logger, routes, ctx.metrics))
    .use(auth(ctx, principals))
    .use(bodyParser(ctx.config.maxBodyBytes));
  for (const route of routes) {
    const needsKey = isManagementPath(route.path);
    app.route(
      route.method,
      route.path,
      ((c: { params: Record<string, string>; query: Record<string, string | undefined>; body: unknown; request: Request; set: RouteInput["set"] }) => {
        if (route.query !== undefined) refuseRepeatedQuery(c.request.url);
        return route.handler({
          params: canonicalParams(c.params),
          query: c.query,
          body: c.body,
          request: c.request,
          principal: principalOf(principals, c.request, needsKey),
          set: c.set,
        });
      }) as never,
      {
        params: route.params,
        // A management route refuses query parameters it does not know, as it refuses unknown body fields.
        query: route.query ?? (needsKey ? NO_QUERY : undefined),
        // A write without input (a DELETE) refuses a body with fields, as every route refuses unknown fields.
        body: route.body ?? (needsKey && route.method !== "GET" ? EmptyBody : undefined),
        response: route.success.schema ? { [route.success.status]: route.success.schema } : undefined,
      } as never,
    );
  }
  return app;
}

export type App = ReturnType<typeof buildApp>;

/**
 * The answer to a request whose URL is not absolute (route.ts hasUsableUrl): 400, before routing
 * or authentication, since neither the project nor the route can be trusted; in the OAuth form
 * on an OAuth route's path. Logged as any request refused before routing, with the pattern its
 * path matches and never the path, and not at all under a path never logged.
 */
function refuseUnusableHost(ctx: AppContext, routes: readonly RouteDef[], request: Request): Response {
  const start = performance.now();
  const { status, headers, body } = errorAnswer(ctx.logger, routes, new AppError("invalid_request", UNUSABLE_HOST_MESSAGE), "UNKNOWN", request, undefined);
  const path = rawPathOf(request.url);
  const answer = Response.json(body, { status, headers });
  logRequest(ctx.logger, ctx.metrics, request.method, matchPath(routes, path)?.path ?? UNMATCHED_ROUTE, path, status, performance.now() - start);
  return answer;
}

/**
 * A request for a health endpoint (GET or HEAD, no body) whose Host is missing or unusable, made
 * again at a placeholder host it does not look at; undefined for any other request.
 */
function healthProbe(request: Request): Request | undefined {
  if ((request.method !== "GET" && request.method !== "HEAD") || request.url.includes("#")) return undefined;
  const path = rawPathOf(request.url);
  if (!HEALTH_PATHS.has(path)) return undefined;
  return new Request(`http://health.invalid${path}`, { method: request.method });
}

/**
 * The fetch handler `serve` listens with, and the app behind it. Each request first checks that
 * the process's memory is up to the data (keys/key-service.ts follow; it waits only when
 * something was written since the last request). The routes asked most, token issuance and
 * discovery, are answered by the direct lane (http/direct.ts), without Elysia's per-request
 * pipeline, whenever all goes well; the app answers everything else, refusals of those routes
 * included. Every answer leaves as soon as it is ready: the JWKS, discovery and health within
 * the request's own callback, a token right after the batch of signatures that completes it
 * (runtime/end-of-turn.ts; docs/performance.md, "Signatures are made together").
 */
export function buildFetch(ctx: AppContext): { app: App; fetch: (request: Request) => Response | Promise<Response> } {
  const routes = routeTable(ctx);
  const app = buildApp(ctx, routes);
  const direct = directLane(ctx, routes, app);
  const fetch = (request: Request): Response | Promise<Response> => {
    if (!hasUsableUrl(request)) {
      // A health probe needs no host: a load balancer's check may send none (HTTP/1.0, HAProxy's httpchk).
      const probe = healthProbe(request);
      if (probe === undefined) return refuseUnusableHost(ctx, routes, request);
      request = probe;
    }
    // Whatever was written before this request, by any process, is what it sees.
    const caughtUp = ctx.keys.follow();
    return caughtUp === undefined ? (direct(request) ?? app.handle(request)) : caughtUp.then(() => direct(request) ?? app.handle(request));
  };
  return { app, fetch };
}
