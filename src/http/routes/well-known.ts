/**
 * @module http/routes/well-known
 * Public discovery: the OpenID configuration (served again, identical, as the RFC 8414 OAuth
 * authorization server metadata) and the JWKS, answered from the in-memory key ring (no store
 * read), with caching headers, a strong ETag and CORS for browsers. Never logged.
 * The `Host` header picks the project (core/project-directory.ts): its own host or its custom
 * domain, each with its own issuer; a host that names no project is the default project. The
 * issuer is always the configured URL of the matched host, never text from the request.
 */
import { ASSERTION_ALGS } from "../../core/oauth/client-assertion.ts";
import { CLIENT_AUTH_METHODS } from "../../core/oauth/client-auth.ts";
import { GRANT_TYPES } from "../../core/oauth/client-credentials.ts";
import type { AppContext } from "../../context.ts";
import { AppError } from "../../errors.ts";
import type { HostMatch } from "../../core/project-directory.ts";
import type { KeyRing } from "../../keys/key-ring.ts";
import type { Static } from "@sinclair/typebox";
import { DiscoveryDocument, Jwks } from "../../schemas/discovery.ts";
import { requestHost, type HeaderDocs, type RouteDef } from "../route.ts";
import { boundedMemo } from "../../runtime/memo.ts";
import { INTROSPECTION_ENDPOINT_PATH, REVOCATION_ENDPOINT_PATH, TOKEN_ENDPOINT_PATH } from "./oauth.ts";

/** The claims every access token carries. */
const CLAIMS = ["iss", "sub", "client_id", "aud", "iat", "exp", "jti"];

/** The discovery document for an issuer and its key ring (OpenID Connect Discovery and RFC 8414 alike). */
export function discoveryDocument(issuer: string, ring: KeyRing): Static<typeof DiscoveryDocument> {
  return {
    issuer,
    jwks_uri: `${issuer}/.well-known/jwks`,
    token_endpoint: `${issuer}${TOKEN_ENDPOINT_PATH}`,
    grant_types_supported: [...GRANT_TYPES],
    token_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS],
    introspection_endpoint: `${issuer}${INTROSPECTION_ENDPOINT_PATH}`,
    introspection_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS],
    // RFC 8414 §2: required beside private_key_jwt, for each endpoint that takes it.
    introspection_endpoint_auth_signing_alg_values_supported: [...ASSERTION_ALGS],
    revocation_endpoint: `${issuer}${REVOCATION_ENDPOINT_PATH}`,
    revocation_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS],
    revocation_endpoint_auth_signing_alg_values_supported: [...ASSERTION_ALGS],
    response_types_supported: ["token"],
    subject_types_supported: ["public"],
    // The keys' algorithms; OpenID Connect Discovery 1.0 §3: "RS256 MUST be included", and
    // validators (authlib's) refuse a document without it. No token of this issuer is RS256-signed
    // unless a key is RSA: a verifier picks the key by kid, and an EC or OKP key verifies no RS256.
    id_token_signing_alg_values_supported: ring.algs.includes("RS256") ? [...ring.algs] : [...ring.algs, "RS256"],
    token_endpoint_auth_signing_alg_values_supported: [...ASSERTION_ALGS],
    claims_supported: CLAIMS,
  };
}

/** The headers of every discovery answer, as the OpenAPI document shows them. */
const DISCOVERY_HEADERS: HeaderDocs = {
  "Cache-Control": "`public, max-age=N`: N is 300 s, or half the rotation period if that is shorter.",
  "Access-Control-Allow-Origin": "`*`: any origin may read it.",
};
const JWKS_HEADERS: HeaderDocs = {
  ...DISCOVERY_HEADERS,
  ETag: "A strong tag that changes whenever the key set changes; send it as If-None-Match.",
  "Access-Control-Expose-Headers": "`ETag`.",
};

export function wellKnownRoutes(ctx: AppContext): RouteDef[] {
  const cacheControlOf = boundedMemo((maxAge: number) => `public, max-age=${maxAge}`);
  const cacheControl = (projectId: string) => cacheControlOf(ctx.keys.jwksMaxAge(projectId));
  // ETag is not a CORS-safelisted response header: exposed, so browser code can revalidate too.
  const common = { "access-control-allow-origin": "*", "access-control-expose-headers": "ETag", "x-content-type-options": "nosniff" };
  /** The answer to a CORS preflight: what a browser may send (If-None-Match included). */
  const preflightHeaders = new Headers({
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET, HEAD",
    "access-control-allow-headers": "If-None-Match",
    "access-control-max-age": "86400",
  });
  /**
   * The JWKS answer's headers per key ring, built once and copied into each answer (cheaper than
   * headers from an object); rebuilt when the ring's max-age changes.
   */
  const jwksHeaders = new WeakMap<KeyRing, { cacheControl: string; notModified: Headers; full: Headers }>();
  /**
   * Serialized discovery documents and their headers per host, rebuilt when the project's ring or
   * max-age changes; gone with the host (a custom domain dropped or changed).
   */
  const discovery = new WeakMap<HostMatch, { ring: KeyRing; cacheControl: string; body: string; headers: Headers }>();

  const jwks = (request: Request): Response => {
    const { project } = ctx.projects.resolveHost(requestHost(request));
    const ring = ctx.keys.ring(project.id);
    const control = cacheControl(project.id);
    let headers = jwksHeaders.get(ring);
    if (headers?.cacheControl !== control) {
      const notModified = { ...common, "cache-control": control, etag: ring.jwksEtag };
      headers = { cacheControl: control, notModified: new Headers(notModified), full: new Headers({ ...notModified, "content-type": "application/jwk-set+json" }) };
      jwksHeaders.set(ring, headers);
    }
    const match = request.headers.get("if-none-match");
    // RFC 9110 §13.1.2: weak comparison, a list of tags, or `*` (any current representation).
    if (match !== null && match.split(",").some((tag) => tag.trim() === "*" || tag.trim().replace(/^W\//, "") === ring.jwksEtag)) {
      return new Response(null, { status: 304, headers: headers.notModified });
    }
    return new Response(ring.jwksBody, { headers: headers.full });
  };
  const jwksRoute = (path: string, operationId: string): RouteDef => ({
    method: "GET",
    path,
    operationId,
    summary: "The JSON Web Key Set that verifies this issuer's tokens",
    tag: "discovery",
    auth: false,
    direct: true,
    success: {
      status: 200,
      description: "`{keys: [...]}` with public members only; supports If-None-Match.",
      documents: { schema: Jwks, contentType: "application/jwk-set+json" },
      headers: JWKS_HEADERS,
    },
    errors: [],
    alsoAnswers: { 304: { description: "Not modified: the If-None-Match matched the current ETag; no body.", headers: JWKS_HEADERS } },
    handler: ({ request }) => jwks(request),
  });

  const discoveryRoute = (path: string, operationId: string, summary: string): RouteDef => ({
    method: "GET",
    path,
    operationId,
    summary,
    tag: "discovery",
    auth: false,
    direct: true,
    success: {
      status: 200,
      description: "Discovery document: issuer, jwks_uri, token_endpoint and what they support.",
      documents: { schema: DiscoveryDocument, contentType: "application/json" },
      headers: DISCOVERY_HEADERS,
    },
    errors: [],
    handler: ({ request }) => {
      const match = ctx.projects.resolveHost(requestHost(request));
      const ring = ctx.keys.ring(match.project.id);
      const control = cacheControl(match.project.id);
      let cached = discovery.get(match);
      if (cached?.ring !== ring || cached.cacheControl !== control) {
        const headers = new Headers({ ...common, "cache-control": control, "content-type": "application/json" });
        cached = { ring, cacheControl: control, body: JSON.stringify(discoveryDocument(match.url, ring)), headers };
        discovery.set(match, cached);
      }
      return new Response(cached.body, { headers: cached.headers });
    },
  });

  /** The preflight of a served route, named after it (`getJwks`: `preflightJwks`). */
  const preflightRoute = ({ path, operationId, atRoot }: RouteDef): RouteDef => ({
    method: "OPTIONS",
    path,
    ...(atRoot === true ? { atRoot } : {}),
    operationId: operationId.replace(/^get/, "preflight"),
    summary: "CORS preflight: browsers may read this document from any origin",
    tag: "discovery",
    auth: false,
    success: {
      status: 204,
      description: "Any origin may GET or HEAD the document, with If-None-Match.",
      headers: {
        "Access-Control-Allow-Origin": "`*`.",
        "Access-Control-Allow-Methods": "`GET, HEAD`.",
        "Access-Control-Allow-Headers": "`If-None-Match`.",
        "Access-Control-Max-Age": "`86400`: browsers may keep the answer a day.",
      },
    },
    errors: [],
    handler: () => new Response(null, { status: 204, headers: preflightHeaders }),
  });

  const served = [
    discoveryRoute("/.well-known/openid-configuration", "getOpenIdConfiguration", "OpenID Provider metadata of the issuer"),
    discoveryRoute("/.well-known/oauth-authorization-server", "getOAuthAuthorizationServerMetadata", "OAuth 2.0 authorization server metadata (RFC 8414): the same document"),
    jwksRoute("/.well-known/jwks", "getJwks"),
    jwksRoute("/.well-known/jwks.json", "getJwksJson"),
  ];
  // RFC 8414 §3.1: an issuer with a path (a proxy's prefix in TOKENMINT_PUBLIC_URL) has its
  // metadata at the well-known path with the issuer's path after it; only that issuer's host has it.
  const issuerPath = new URL(ctx.config.publicUrl).pathname.replace(/\/$/, "");
  if (issuerPath !== "") {
    const metadata = discoveryRoute(`/.well-known/oauth-authorization-server${issuerPath}`, "getOAuthAuthorizationServerMetadataAtIssuerPath", "The same metadata where RFC 8414 clients look for an issuer with a path");
    const answer = metadata.handler;
    served.push({
      ...metadata,
      direct: false,
      atRoot: true,
      errors: [404],
      handler: (input) => {
        const { url } = ctx.projects.resolveHost(requestHost(input.request));
        if (new URL(url).pathname.replace(/\/$/, "") !== issuerPath) throw new AppError("not_found", "No issuer of this host has this path.");
        return answer(input);
      },
    });
  }
  return [...served, ...served.map(preflightRoute)];
}
