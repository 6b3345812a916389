/**
 * @module http/direct
 * The direct lane: the routes asked most (token issuance and discovery, `direct` in the route
 * table) answered without Elysia's per-request pipeline when all goes well. It does what that
 * pipeline does for them, in the same order and with the same pieces: the API key of a management
 * path (core/api-keys.ts), the body's size limit and parsing (plugins/body-parser.ts), validation
 * of the path parameters and the body against the route's own TypeBox schemas (each compiled
 * once, when first used), the handler, validation of its answer, and the metrics and log line of
 * the request (plugins/request-log.ts). The pipeline's hooks and per-request objects are what it
 * saves.
 *
 * Whatever is refused before the handler runs (no valid API key, a body too large or not JSON,
 * invalid parameters or body, a shutting-down process) goes to the app, with the body put back if
 * it was read, so every refusal is the app's own answer. What the handler throws is answered by
 * the error hook's own mapping (plugins/error-handler.ts errorAnswer), as the app would answer it,
 * and so is a body that cannot be read (the app's parser failing).
 * Paths are matched exactly: any other spelling (a trailing slash, an encoded segment) goes to
 * the app too.
 */
import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler, type TypeCheck } from "@sinclair/typebox/compiler";
import "elysia"; // registers the string formats (date-time) the compiled checks use
import { authenticate, NO_PRINCIPAL } from "../core/api-keys.ts";
import { canonicalParams } from "../core/ids.ts";
import type { AppContext } from "../context.ts";
import { bodyBytes, parseBody } from "./plugins/body-parser.ts";
import { errorAnswer } from "./plugins/error-handler.ts";
import { logRequest } from "./plugins/request-log.ts";
import { admitInFlight, isManagementPath } from "./plugins/auth.ts";
import { pathOf, patternSource, type RouteDef, type RouteInput } from "./route.ts";

/** The app the lane hands everything else to. */
export interface FullPipeline {
  handle(request: Request): Response | Promise<Response>;
}

/** Whether a value matches a schema. */
interface Check {
  Check(value: unknown): boolean;
}

/** A direct route, ready: its checks and how its path is matched. */
interface Lane {
  route: RouteDef;
  /** The route's pattern as a regular expression with one group per parameter, if it has any. */
  pattern?: RegExp;
  names: string[];
  params?: Check;
  body?: Check;
  answer?: Check;
}

/**
 * The check of `schema`, compiled by TypeBox at its first use. Compiling every direct route's
 * schemas at start-up cost a starting server about 7 ms before it could listen.
 */
function checkOf(schema: TSchema | undefined): Check | undefined {
  if (schema === undefined) return undefined;
  let compiled: TypeCheck<TSchema> | undefined;
  return { Check: (value) => (compiled ??= TypeCompiler.Compile(schema)).Check(value) };
}

/** Thrown when a handler's answer does not match its route's schema: a 500, as in the app. */
class AnswerMismatch extends Error {
  override name = "AnswerMismatch";
}

function prepare(route: RouteDef): Lane {
  if (route.query !== undefined) throw new Error(`direct route ${route.method} ${route.path} has a query schema`);
  // The lane reads a body and an API key only for POST: a direct GET must need neither.
  if (route.method === "GET" ? isManagementPath(route.path) : route.method !== "POST") throw new Error(`direct route ${route.method} ${route.path} is not supported`);
  const names = route.path
    .split("/")
    .filter((segment) => segment.startsWith(":"))
    .map((segment) => segment.slice(1));
  return {
    route,
    // Exact: one group per parameter, no trailing slash.
    pattern: names.length === 0 ? undefined : new RegExp(`^${patternSource(route.path, "([^/]+)")}$`),
    names,
    params: checkOf(route.params),
    body: checkOf(route.body),
    answer: checkOf(route.success.schema),
  };
}

/**
 * The direct lane of `routes` (those marked `direct`): a function that answers a request of one of
 * them, or returns undefined for every other request (the caller hands those to the app). It only
 * takes requests while the process is not draining.
 */
export function directLane(ctx: AppContext, routes: readonly RouteDef[], app: FullPipeline): (request: Request) => Promise<Response> | Response | undefined {
  /** Routes without parameters by path, per method; the others are matched in turn. */
  const exactGet = new Map<string, Lane>();
  const exactPost = new Map<string, Lane>();
  const patterned: Lane[] = [];
  for (const route of routes) {
    if (route.direct !== true) continue;
    const lane = prepare(route);
    if (lane.pattern !== undefined) patterned.push(lane);
    else (route.method === "GET" ? exactGet : exactPost).set(route.path, lane);
  }
  const maxBytes = ctx.config.maxBodyBytes;

  /** The error answer of a request the lane took: what its handler threw, an answer off its schema, or a body that could not be read. */
  const fail = (error: unknown, request: Request, lane: Lane, set: RouteInput["set"], code = "UNKNOWN"): Response => {
    const { status, headers, body } = errorAnswer(ctx.logger, routes, error, code, request, lane.route.path);
    Object.assign(set.headers, headers);
    return Response.json(body, { status, headers: set.headers as Record<string, string> });
  };

  /** The handler's answer as the app would send it: a Response as is, an object as JSON. */
  const respond = (answer: unknown, request: Request, lane: Lane, set: RouteInput["set"]): Response => {
    if (answer instanceof Response) return answer;
    try {
      if (answer === null || typeof answer !== "object") throw new AnswerMismatch(`${lane.route.path} answered neither a Response nor an object`);
      if (lane.answer !== undefined && !lane.answer.Check(answer)) throw new AnswerMismatch(`the answer of ${lane.route.path} does not match its schema`);
    } catch (error) {
      return fail(error, request, lane, set);
    }
    return Response.json(answer, { status: set.status ?? 200, headers: set.headers as Record<string, string> });
  };

  const finish = (request: Request, lane: Lane, pathname: string, started: number, response: Response): Response => {
    logRequest(ctx.logger, ctx.metrics, request.method, lane.route.path, pathname, response.status, performance.now() - started);
    return response;
  };

  /** A request with a body: API key, body, checks and handler; the app takes whatever is refused. */
  const withBody = async (request: Request, lane: Lane, pathname: string, params: Record<string, string>, started: number): Promise<Response> => {
    // Taken before the process began to drain: whatever the app answers for it, it is in flight.
    const handOver = (taken: Request) => app.handle(admitInFlight(taken));
    let principal = NO_PRINCIPAL;
    if (isManagementPath(pathname)) {
      // A management route takes no query: the app refuses one (and answers an empty one).
      if (request.url.includes("?")) return handOver(request);
      try {
        principal = await authenticate(ctx.store, request.headers.get("authorization"), ctx.clock.now());
      } catch {
        return handOver(request);
      }
    }
    const reading = bodyBytes(request, maxBytes);
    // A declared length over the limit is refused by the app before anything is read.
    if (reading === undefined) return handOver(request);
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = await reading;
    } catch (error) {
      // The body could not be read (the client went away): answered as the app's parser failing.
      return finish(request, lane, pathname, started, fail(error, request, lane, { headers: {} }, "PARSE"));
    }
    let body: unknown;
    let parsed = bytes.byteLength <= maxBytes;
    if (parsed) {
      try {
        body = parseBody(bytes, request, pathname);
      } catch {
        parsed = false;
      }
    }
    if (!parsed || (lane.body !== undefined && !lane.body.Check(body))) {
      return handOver(new Request(request.url, { method: request.method, headers: request.headers, body: bytes }));
    }
    const set: RouteInput["set"] = { headers: {} };
    let answer: unknown;
    try {
      answer = await lane.route.handler({ params, query: {}, body, request, principal, set });
    } catch (error) {
      return finish(request, lane, pathname, started, fail(error, request, lane, set));
    }
    return finish(request, lane, pathname, started, respond(answer, request, lane, set));
  };

  /** A request without a body and without an API key (discovery): synchronous when its handler is. */
  const bodiless = (request: Request, lane: Lane, pathname: string, params: Record<string, string>, started: number): Response | Promise<Response> => {
    const set: RouteInput["set"] = { headers: {} };
    let answer: unknown;
    try {
      answer = lane.route.handler({ params, query: {}, body: undefined, request, principal: NO_PRINCIPAL, set });
    } catch (error) {
      return finish(request, lane, pathname, started, fail(error, request, lane, set));
    }
    if (!(answer instanceof Promise)) return finish(request, lane, pathname, started, respond(answer, request, lane, set));
    return answer.then(
      (value) => finish(request, lane, pathname, started, respond(value, request, lane, set)),
      (error) => finish(request, lane, pathname, started, fail(error, request, lane, set)),
    );
  };

  return (request) => {
    if (ctx.draining) return undefined;
    const method = request.method;
    const table = method === "GET" ? exactGet : method === "POST" ? exactPost : undefined;
    if (table === undefined) return undefined;
    const pathname = pathOf(request.url);
    let lane = table.get(pathname);
    let params: Record<string, string> = {};
    if (lane === undefined) {
      for (const candidate of patterned) {
        if (candidate.route.method !== method) continue;
        const match = (candidate.pattern as RegExp).exec(pathname);
        if (match === null) continue;
        lane = candidate;
        for (let i = 0; i < candidate.names.length; i++) params[candidate.names[i] as string] = match[i + 1] as string;
        break;
      }
      if (lane === undefined) return undefined;
    }
    if (lane.params !== undefined && !lane.params.Check(params)) return undefined;
    canonicalParams(params);
    const started = performance.now();
    return method === "GET" ? bodiless(request, lane, pathname, params, started) : withBody(request, lane, pathname, params, started);
  };
}
