/**
 * @module http/openapi
 * The OpenAPI 3.1 document, generated from the route table: the same TypeBox schemas that
 * validate requests and responses describe them here. OAuth routes (route.ts isOAuthPath) take a
 * form body and answer errors as `OAuthError` (`{error, error_description}`).
 */
import type { TSchema } from "@sinclair/typebox";
import { UUID_PATTERN } from "../core/ids.ts";
import { trimmedTextPattern } from "../core/text.ts";
import { OAUTH_ERROR_TABLE } from "../core/oauth/errors.ts";
import { ERROR_TABLE } from "../errors.ts";
import { ErrorBody } from "../schemas/common.ts";
import { OAuthErrorBody } from "../schemas/oauth.ts";
import { isOAuthPath, type HeaderDocs, type RouteDef } from "./route.ts";

const json = (schema: TSchema) => ({ "application/json": { schema: strip(schema) } });
const form = (schema: TSchema) => ({ "application/x-www-form-urlencoded": { schema: strip(schema) } });
const errorRef = (name: string) => ({ "application/json": { schema: { $ref: `#/components/schemas/${name}` } } });

/** OpenAPI header objects of `docs` (none: nothing to add to the response). */
const headers = (docs: HeaderDocs | undefined) =>
  docs === undefined ? {} : { headers: Object.fromEntries(Object.entries(docs).map(([name, description]) => [name, { description, schema: { type: "string" } }])) };

/** Headers of an error answer by status; the OAuth routes' errors are never cached either. */
function errorHeaders(status: number, oauth: boolean): HeaderDocs | undefined {
  const docs: Record<string, string> = {};
  if (status === 401) docs["WWW-Authenticate"] = oauth ? "`Basic`: the client's credentials were refused." : "`Bearer`: the API key is missing, unknown, revoked or expired.";
  if (status === 405) docs.Allow = "The methods the path answers.";
  if (status === 503) docs["Retry-After"] = "Seconds to wait, when the server is shutting down.";
  if (oauth) Object.assign(docs, { "Cache-Control": "`no-store`.", Pragma: "`no-cache`." });
  return Object.keys(docs).length === 0 ? undefined : docs;
}

/**
 * The documented error response of a status: our code for it, or for OAuth routes the OAuth codes
 * of that status (a status OAuth does not define, such as 413, is `invalid_request`).
 */
function errorResponse(status: number, oauth: boolean): unknown {
  const ours = Object.entries(ERROR_TABLE).find(([, v]) => v.status === status);
  const codes = oauth ? Object.entries(OAUTH_ERROR_TABLE).filter(([, v]) => v.status === status).map(([code, v]) => [code, v.description]) : [];
  if (oauth && codes.length === 0) codes.push(["invalid_request", ours?.[1].message ?? "The request is invalid."]);
  if (!oauth && ours !== undefined) codes.push([ours[0], ours[1].message]);
  const description = codes.length === 0 ? "Error" : codes.map(([code, text]) => `\`${code}\`: ${text}`).join(" ");
  return { description, ...headers(errorHeaders(status, oauth)), content: errorRef(oauth ? "OAuthError" : "Error") };
}

/** Drops TypeBox's symbol keys and our `errorMessage` extension by a JSON round trip. */
const strip = (schema: TSchema): unknown =>
  JSON.parse(
    JSON.stringify(schema, (key, value) => {
      if (key === "errorMessage" || key === "$id") return undefined;
      // A string checked by a regular expression (schemas/common.ts Chars): JSON Schema's own keywords.
      if (value !== null && typeof value === "object" && value.type === "RegExp") {
        const { min, max } = value["x-characters"] as { min: number; max: number };
        // A trimmed field (schemas/common.ts Text): the text as sent may carry white space around its 1..max characters.
        if (value["x-trimmed"] === true) {
          const description = `${value.description} White space around it is trimmed first; then 1 to ${max} characters without control characters.`;
          return { type: "string", description, minLength: 1, pattern: trimmedTextPattern(max).source };
        }
        return { type: "string", description: value.description, minLength: min, maxLength: max, pattern: value.source };
      }
      // A UUID (schemas/common.ts Uuid): its format too, which tools read where a pattern means nothing to them.
      if (value !== null && typeof value === "object" && value.pattern === UUID_PATTERN) return { ...value, format: "uuid" };
      return value;
    }),
  );

/** The body of a route's success: its validated schema, or the one it documents for a Response it builds. */
function successContent({ success }: RouteDef): { content?: unknown } {
  if (success.schema !== undefined) return { content: json(success.schema) };
  if (success.documents !== undefined) return { content: { [success.documents.contentType]: { schema: strip(success.documents.schema) } } };
  return {};
}

function parameters(route: RouteDef): unknown[] {
  const list: unknown[] = [];
  for (const [where, schema] of [["path", route.params], ["query", route.query]] as const) {
    const properties = (schema as { properties?: Record<string, TSchema> } | undefined)?.properties ?? {};
    const required = new Set((schema as { required?: string[] } | undefined)?.required ?? []);
    for (const [name, property] of Object.entries(properties)) {
      list.push({ name, in: where, required: where === "path" || required.has(name), description: property.description, schema: strip(property) });
    }
  }
  return list;
}

/** The license of tokenmint (package.json), as OpenAPI 3.1 names one: by its SPDX identifier. */
export const LICENSE = { name: "Apache-2.0", identifier: "Apache-2.0" } as const;

/** The HEAD beside a GET operation: its answers without their bodies (`getJwks`: `headJwks`). */
function headOperation(get: { operationId: string; summary: string; responses: Record<string, unknown> }): Record<string, unknown> {
  const name = get.operationId.startsWith("get") ? get.operationId.slice(3) : `${get.operationId[0]?.toUpperCase()}${get.operationId.slice(1)}`;
  const responses = Object.fromEntries(
    Object.entries(get.responses).map(([status, answer]) => {
      const { content: _content, ...bare } = answer as Record<string, unknown>;
      return [status, bare];
    }),
  );
  return { ...get, operationId: `head${name}`, summary: `${get.summary}: headers only`, responses };
}

/** Builds the document for `routes`. */
export function openApiDocument(routes: readonly RouteDef[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  // Any request may get these: a Host that makes no URL, a wrong method, a fault, shutting down.
  const universal = [400, 405, 500, 503];
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    const responses: Record<string, unknown> = {
      [route.success.status]: { description: route.success.description, ...headers(route.success.headers), ...successContent(route) },
    };
    for (const [status, answer] of Object.entries(route.alsoAnswers ?? {})) responses[status] = { description: answer.description, ...headers(answer.headers) };
    const oauth = isOAuthPath(route.path);
    // Under /v1/: the API key (401), and for a write its JSON body (413, 415), whatever the route.
    const managed = route.auth ? [401, ...(route.method === "GET" ? [] : [413, 415])] : [];
    for (const status of [...new Set([...route.errors, ...universal, ...managed])].sort()) responses[status] = errorResponse(status, oauth);
    // Beside a prefix a proxy adds, the path stays at the host's root.
    if (route.atRoot === true) (paths[path] ??= {}).servers = [{ url: "/", description: "The root of the host this document is served at" }];
    const operation = {
      operationId: route.operationId,
      summary: route.summary,
      tags: [route.tag],
      // Management: the API key. OAuth: client_secret_basic, or the credentials in the form (client_secret_post, private_key_jwt).
      ...(route.auth ? {} : { security: oauth ? [{ clientBasic: [] }, {}] : [] }),
      parameters: parameters(route),
      ...(route.body ? { requestBody: { required: oauth, content: oauth ? form(route.body) : json(route.body) } } : {}),
      responses,
    };
    (paths[path] ??= {})[route.method.toLowerCase()] = operation;
    // Every GET answers HEAD too (RFC 9110 §9.3.2): the same status and headers, no body. Listed
    // for the public documents (discovery, the JWKS, health, this document), which caches and
    // load balancers ask so; under /v1/ it would only double a generated client's methods.
    if (route.method === "GET" && !route.auth) (paths[path] as Record<string, unknown>).head = headOperation(operation);
  }
  return {
    openapi: "3.1.0",
    info: { title: "tokenmint", version, description: "Machine-to-machine JWT access tokens with rotating signing keys.", license: LICENSE },
    // Relative to the document's own address (each project's host serves the same API): behind a
    // proxy that serves it under a path prefix, the operations are under that prefix too.
    servers: [{ url: ".", description: "Where this document is served: the host, and the path prefix a proxy adds" }],
    security: [{ apiKey: [] }],
    components: {
      securitySchemes: {
        apiKey: { type: "http", scheme: "bearer", description: "A management API key." },
        clientBasic: {
          type: "http",
          scheme: "basic",
          description: "client_secret_basic (RFC 6749 §2.3.1): the client id and secret, each form-urlencoded. client_secret_post and private_key_jwt send them in the form instead.",
        },
      },
      schemas: { Error: strip(ErrorBody), OAuthError: strip(OAuthErrorBody) },
    },
    paths,
  };
}
