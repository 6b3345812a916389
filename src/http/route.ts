/**
 * @module http/route
 * A route is declared once, as data: method, path, schemas and a thin handler. buildApp registers
 * the table with Elysia, the OpenAPI document is generated from it, and the error handler uses it
 * to tell 405 (known path, other method) from 404.
 */
import type { TSchema } from "@sinclair/typebox";
import type { Principal } from "../core/api-keys.ts";
import { boundedMemo } from "../runtime/memo.ts";

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS";

/** What a handler gets: validated input, the caller, and a place to set status and headers. */
export interface RouteInput {
  params: Record<string, string>;
  query: Record<string, string | undefined>;
  body: unknown;
  request: Request;
  /** Set for authenticated routes. */
  principal: Principal;
  set: { status?: number; headers: Record<string, string | number> };
}

/** Headers an answer carries, by name, with what each says: for the OpenAPI document. */
export type HeaderDocs = Readonly<Record<string, string>>;

/** The headers of an answer that carries a secret or a token. */
export const NO_STORE_HEADERS: HeaderDocs = { "Cache-Control": "`no-store`: never cached.", Pragma: "`no-cache`, for HTTP/1.0 caches." };

export interface RouteDef {
  method: Method;
  /** Elysia path pattern, e.g. `/v1/providers/:providerId`. */
  path: string;
  /** The operation's name in the OpenAPI document, unique in the table: what generated clients call their methods. */
  operationId: string;
  summary: string;
  tag: string;
  /** Management routes need an API key; discovery does not. */
  auth: boolean;
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  /**
   * Success status and its body schema (undefined for no body). A route that answers a Response
   * it builds itself names that body's schema and media type in `documents` instead, for the
   * OpenAPI document only (nothing validates it).
   */
  success: { status: number; schema?: TSchema; description: string; documents?: { schema: TSchema; contentType: string }; headers?: HeaderDocs };
  /** Error codes this route can answer besides the universal ones. */
  errors: number[];
  /** Other answers than the success and the errors, by status, with their description and headers (a 304). */
  alsoAnswers?: Readonly<Record<number, { description: string; headers?: HeaderDocs }>>;
  /**
   * Served at the host's root even where a proxy puts the API under a path prefix (RFC 8414's
   * metadata of an issuer with a path): the OpenAPI document gives it the root as its server.
   */
  atRoot?: boolean;
  /**
   * Answered by the direct lane (http/direct.ts) when all goes well: the routes asked most. Such a
   * route has no query schema and answers a Response or a JSON object.
   */
  direct?: boolean;
  handler(input: RouteInput): unknown | Promise<unknown>;
}

/** A path pattern as regular-expression source: each `:name` segment becomes `param`, the rest matches literally. */
export function patternSource(path: string, param: string): string {
  return path
    .split("/")
    .map((segment) => (segment.startsWith(":") ? param : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
}

const patterns = new Map<string, RegExp>();

/** A path pattern as a regular expression (`:name` matches one segment; a trailing slash is allowed), made once per pattern. */
export function patternRegExp(path: string): RegExp {
  let pattern = patterns.get(path);
  if (pattern === undefined) patterns.set(path, (pattern = new RegExp(`^${patternSource(path, "[^/]+")}/?$`)));
  return pattern;
}

/**
 * Whether a request's failures take the RFC 6749 §5.2 form `{error, error_description}`: a path
 * of one of the OAuth routes (any method). Every other path, an unknown one under /oauth/
 * included, takes `{code, message}`.
 */
export const takesOAuthErrors = (routes: readonly Pick<RouteDef, "method" | "path">[], pathname: string): boolean =>
  isOAuthPath(pathname) && matchPath(routes, pathname) !== undefined;

/** Finds the route pattern matching `pathname` and the methods it allows. */
export function matchPath(routes: readonly Pick<RouteDef, "method" | "path">[], pathname: string): { path: string; methods: Method[] } | undefined {
  const matching = routes.filter((r) => patternRegExp(r.path).test(pathname));
  if (matching.length === 0) return undefined;
  return { path: (matching[0] as RouteDef).path, methods: [...new Set(matching.map((r) => r.method))] };
}

/**
 * The path of a request URL, without building a URL object (every request asks for it). A
 * request's `url` is already serialized, its path normalized, so this is its URL's `pathname`:
 * up to the query or fragment. A `url` that is only a path (what Bun.serve gives when the Host
 * header is missing or unusable; such requests are refused, see hasUsableUrl) is read as one.
 */
export function pathOf(url: string): string {
  const scheme = url.indexOf("://");
  let start = url.charCodeAt(0) === 47 /* "/" */ || scheme === -1 ? 0 : scheme + 3;
  while (start < url.length && url[start] !== "/" && url[start] !== "?" && url[start] !== "#") start++;
  if (url[start] !== "/") return "/";
  let end = url.indexOf("?", start);
  if (end === -1) end = url.length;
  const fragment = url.indexOf("#", start);
  return url.slice(start, fragment !== -1 && fragment < end ? fragment : end);
}

/**
 * Paths of the OAuth endpoints. Their bodies are form-encoded and their errors take the RFC 6749
 * form `{error, error_description}`; body-parser.ts, error-handler.ts and openapi.ts decide by this.
 */
export const isOAuthPath = (pathname: string) => pathname === "/oauth" || pathname.startsWith("/oauth/");

/**
 * The host a request was sent to: its `Host` header (what Bun.serve also builds `request.url`
 * from), else the URL's host for requests built in-process. `X-Forwarded-Host` is never read.
 */
export const requestHost = (request: Request): string => request.headers.get("host") ?? new URL(request.url).host;

/**
 * Whether a request's URL is absolute and well-formed, and names one host. Bun.serve builds
 * `request.url` from the Host header; without one (HTTP/1.0), or with one that is not a host
 * (`a b`, `a/b`, `[::1`), the URL is only a path or cannot be parsed, and nothing that depends on
 * the host (the project, the issuer) can be decided: such a request is refused before anything
 * else (app.ts). So is one with two Host lines (RFC 9112 §3.2; the URL takes the first, the
 * header reads both, joined by a comma), and one whose target carries a fragment, which no
 * client sends and which the router would read as part of the path.
 */
export const hasUsableUrl = (request: Request): boolean => {
  const url = request.url;
  return parsesAsUrl(url) && !url.includes("#") && request.headers.get("host")?.includes(",") !== true;
};

/**
 * `URL.canParse` of a URL's start up to the first `/` of its path (its host), or "whole" where
 * that start holds a tab or newline: the parser drops those first, so the authority may start
 * elsewhere.
 */
const hostParses = boundedMemo((start: string): boolean | "whole" => (/[\t\n\r]/.test(start) ? "whole" : URL.canParse(start)));

/**
 * `URL.canParse(url)`, remembered by the URL's scheme and authority. Only those can fail to parse
 * (WHATWG URL: the path, query and fragment states never fail). The authority starts after the
 * slashes that follow `://` (http ignores extra ones: `http:///a` is host `a`) and ends at or
 * before the first `/` after its start, so two URLs alike up to and including that `/` both
 * parse or both fail. A URL without such a `/`, or with a tab or newline before it (the parser
 * drops those first), is parsed whole each time.
 */
export function parsesAsUrl(url: string): boolean {
  const scheme = url.indexOf("://");
  let authority = scheme === -1 ? -1 : scheme + 3;
  while (authority !== -1 && (url[authority] === "/" || url[authority] === "\\")) authority++;
  const slash = authority === -1 ? -1 : url.indexOf("/", authority);
  if (slash === -1) return URL.canParse(url);
  const verdict = hostParses(url.slice(0, slash + 1));
  return verdict === "whole" ? URL.canParse(url) : verdict;
}

/** The refusal of a request without a usable Host header. */
export const UNUSABLE_HOST_MESSAGE = "The request needs one Host header naming the host it was sent to, and a target without a fragment.";
