/**
 * Shared setup of the interop tests: a tokenmint listening on loopback whose issuer is its own
 * address, a provider, client, client secret and client public key (private_key_jwt) made through
 * the management API, and three
 * tables the tests loop over:
 * - TOKEN_SOURCES: every way a client gets a token (the management route, and /oauth/token with
 *   each client authentication method of TOKEN_ENDPOINT_AUTH);
 * - OPENID_CLIENT_AUTH: the same methods as openid-client's ClientAuth implementations;
 * - VERIFIERS: the verifier libraries a resource server brings, each configured the way its
 *   documentation says, fetching discovery and the JWKS over HTTP, with its errors sorted into the
 *   reasons a test expects (`Failure`).
 * A new client authentication method is one entry in TOKEN_ENDPOINT_AUTH and one in
 * OPENID_CLIENT_AUTH; a new verifier library is one entry in VERIFIERS.
 *
 * The clock is the wall clock at start, held still: the libraries check `exp` against their own
 * clock, without a time option, as they do in a user's service (only the expiry control moves it).
 */
import { expect } from "bun:test";
import { createPublicKey } from "node:crypto";
import { createVerifier, TokenError } from "fast-jwt";
import buildGetJwks from "get-jwks";
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, errors as joseErrors, exportJWK, generateKeyPair, jwtVerify, SignJWT } from "jose";
import jsonwebtoken, { type Algorithm, type JwtPayload } from "jsonwebtoken";
import { JwksClient } from "jwks-rsa";
import * as oidc from "openid-client";
import type { SigningAlg } from "../../src/config/schema.ts";
import { buildTestApp, createProviderAndClient, FakeClock, type TestApp } from "../helpers/app.ts";
import { json } from "../http/support.ts";
import { basic, createSecret, FORM } from "../oauth/support.ts";

export const ALGS = ["RS256", "ES256", "EdDSA"] as const satisfies readonly SigningAlg[];
export const AUDIENCE = "https://billing.example.test";

/** A tokenmint reachable over HTTP at its issuer, with one client and one secret of it. */
export interface InteropServer {
  alg: SigningAlg;
  t: TestApp;
  /** `http://127.0.0.1:<port>`: the configured public URL, so discovery points back here. */
  issuer: string;
  audience: string;
  providerId: string;
  clientId: string;
  secret: string;
  /** The client's private key for private_key_jwt (ES256); its public half is registered. */
  clientKey: CryptoKey;
  close(): Promise<void>;
}

/** Starts a server for one signing algorithm: listen first, then build the app with that address as its issuer. */
export async function startInteropServer(alg: SigningAlg): Promise<InteropServer> {
  let handle: TestApp["fetch"] | undefined;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request) => (handle === undefined ? new Response(null, { status: 503 }) : handle(request)),
  });
  const issuer = `http://127.0.0.1:${server.port}`;
  const t = await buildTestApp({ alg, publicUrl: issuer, clock: new FakeClock(Date.now()) });
  handle = t.fetch;
  const { providerId, clientId } = await createProviderAndClient(t, AUDIENCE);
  const { secret } = await createSecret(t, providerId, clientId);
  const clientKey = await generateKeyPair("ES256", { extractable: true });
  const registered = await t.api("PUT", `/v1/providers/${providerId}/clients/${clientId}/jwks`, { keys: [await exportJWK(clientKey.publicKey)] });
  expect(registered.status).toBe(200);
  return {
    alg,
    t,
    issuer,
    audience: AUDIENCE,
    providerId,
    clientId,
    secret,
    clientKey: clientKey.privateKey,
    close: async () => {
      await server.stop(true);
      await t.close();
    },
  };
}

// --- Getting tokens ---------------------------------------------------------------------------

/** What a raw token request adds to authenticate the client: headers and form parameters. */
export interface ClientAuthentication {
  headers: Record<string, string>;
  params: Record<string, string>;
}

/** The token endpoint's client authentication methods, as discovery names them. */
export const TOKEN_ENDPOINT_AUTH: Record<string, (s: InteropServer) => Promise<ClientAuthentication>> = {
  client_secret_basic: async (s) => ({ headers: { authorization: basic(s.clientId, s.secret) }, params: {} }),
  client_secret_post: async (s) => ({ headers: {}, params: { client_id: s.clientId, client_secret: s.secret } }),
  private_key_jwt: async (s) => ({
    headers: {},
    params: {
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: await new SignJWT({})
        .setProtectedHeader({ alg: "ES256" })
        .setIssuer(s.clientId)
        .setSubject(s.clientId)
        .setAudience(`${s.issuer}/oauth/token`)
        .setJti(crypto.randomUUID())
        .setIssuedAt()
        .setExpirationTime("60s")
        .sign(s.clientKey),
    },
  }),
};

/** The RFC 6749 §5.1 answer of the token endpoint. */
export interface TokenEndpointAnswer {
  access_token: string;
  token_type: string;
  expires_in: number;
}

/** POST {issuer}/oauth/token over the socket with the client credentials grant; expects 200. */
export async function oauthToken(s: InteropServer, method: string): Promise<TokenEndpointAnswer> {
  const auth = await (TOKEN_ENDPOINT_AUTH[method] as (s: InteropServer) => Promise<ClientAuthentication>)(s);
  const res = await fetch(`${s.issuer}/oauth/token`, {
    method: "POST",
    headers: { ...FORM, ...auth.headers },
    body: new URLSearchParams({ grant_type: "client_credentials", ...auth.params }),
  });
  expect({ status: res.status, body: res.status === 200 ? "" : await res.clone().text() }).toEqual({ status: 200, body: "" });
  return json<TokenEndpointAnswer>(res);
}

/** POST /v1/providers/{p}/clients/{c}/tokens over the socket with the API key; expects 201. */
export async function managementToken(s: InteropServer): Promise<string> {
  const res = await fetch(`${s.issuer}/v1/providers/${s.providerId}/clients/${s.clientId}/tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.t.apiKey}` },
  });
  expect(res.status).toBe(201);
  return (await json<{ accessToken: string }>(res)).accessToken;
}

export interface TokenSource {
  name: string;
  issue(s: InteropServer): Promise<string>;
}

/** Every way a client gets an access token. */
export const TOKEN_SOURCES: TokenSource[] = [
  { name: "POST /v1/providers/{p}/clients/{c}/tokens", issue: managementToken },
  ...Object.keys(TOKEN_ENDPOINT_AUTH).map((method) => ({
    name: `POST /oauth/token (${method})`,
    issue: async (s: InteropServer) => (await oauthToken(s, method)).access_token,
  })),
];

// --- openid-client ----------------------------------------------------------------------------

/** openid-client's implementation of each client authentication method. */
export const OPENID_CLIENT_AUTH: Record<string, (s: InteropServer) => Promise<oidc.ClientAuth>> = {
  client_secret_basic: async (s) => oidc.ClientSecretBasic(s.secret),
  client_secret_post: async (s) => oidc.ClientSecretPost(s.secret),
  private_key_jwt: async (s) => oidc.PrivateKeyJwt(s.clientKey),
};

/** One HTTP exchange as openid-client made it. */
export interface Exchange {
  url: string;
  method: string;
  headers: Headers;
  body: string;
  response: Response;
}

/**
 * openid-client's Configuration from discovery at the issuer, authenticating with `method`.
 * Plain http on loopback needs the documented `allowInsecureRequests`; every exchange is recorded
 * in `exchanges` (the response is a clone, still readable).
 */
export async function openidClientConfig(s: InteropServer, method: string, exchanges: Exchange[] = []): Promise<oidc.Configuration> {
  const auth = await (OPENID_CLIENT_AUTH[method] as (s: InteropServer) => Promise<oidc.ClientAuth>)(s);
  const record: oidc.CustomFetch = async (url, options) => {
    const response = await fetch(url, options as RequestInit);
    exchanges.push({
      url,
      method: options.method,
      headers: new Headers(options.headers as HeadersInit),
      body: options.body === undefined || options.body === null ? "" : String(options.body),
      response: response.clone(),
    });
    return response;
  };
  return oidc.discovery(new URL(s.issuer), s.clientId, undefined, auth, {
    execute: [oidc.allowInsecureRequests],
    [oidc.customFetch]: record,
  });
}

// --- Verifying tokens -------------------------------------------------------------------------

/** What the resource server expects of a token. `now` moves the verifier's clock (expiry control only). */
export interface Expectations {
  issuer: string;
  audience: string;
  now?: Date;
}

export interface VerifiedToken {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
}

/** Why a verifier refused a token, from its own error. */
export type Failure = "signature" | "audience" | "issuer" | "expired" | "unsupported" | "other";

export interface Verifier {
  name: string;
  /** The signing algorithms the library can verify; for the others a test shows how it refuses. */
  algs: readonly SigningAlg[];
  /** A verify function for one server, its key fetching set up once (and cached) as in a service. */
  build(s: InteropServer): (token: string, expectations: Expectations) => Promise<VerifiedToken>;
  /** The reason behind one of the library's errors. */
  failure(error: unknown): Failure;
}

const seconds = (date: Date | undefined) => (date === undefined ? undefined : Math.floor(date.getTime() / 1000));

/** The discovery document's jwks_uri (the libraries are given the issuer, and find the rest). */
async function discoveredJwksUri(issuer: string): Promise<string> {
  const res = await fetch(`${issuer}/.well-known/openid-configuration`);
  expect(res.status).toBe(200);
  return (await json<{ jwks_uri: string }>(res)).jwks_uri;
}

const joseVerifier: Verifier = {
  name: "jose",
  algs: ALGS,
  build: (s) => {
    let jwks: ReturnType<typeof createRemoteJWKSet> | undefined;
    return async (token, { issuer, audience, now }) => {
      jwks ??= createRemoteJWKSet(new URL(await discoveredJwksUri(s.issuer)));
      const { payload, protectedHeader } = await jwtVerify(token, jwks, { issuer, audience, typ: "at+jwt", algorithms: [s.alg], currentDate: now });
      return { header: { ...protectedHeader }, payload: { ...payload } };
    };
  },
  failure: (error) => {
    if (error instanceof joseErrors.JWSSignatureVerificationFailed) return "signature";
    if (error instanceof joseErrors.JWTExpired) return "expired";
    if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === "aud") return "audience";
    if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === "iss") return "issuer";
    if (error instanceof joseErrors.JOSENotSupported) return "unsupported";
    return "other";
  },
};

const jsonwebtokenVerifier: Verifier = {
  name: "jsonwebtoken + jwks-rsa",
  // jsonwebtoken 9 knows HS*, RS*, PS* and ES* only (its jws/jwa have no EdDSA).
  algs: ["RS256", "ES256"],
  build: (s) => {
    let client: JwksClient | undefined;
    return async (token, { issuer, audience, now }) => {
      client ??= new JwksClient({ jwksUri: await discoveredJwksUri(s.issuer) });
      const keys = client;
      const getKey: jsonwebtoken.GetPublicKeyOrSecret = (header, callback) => {
        keys.getSigningKey(header.kid).then((key) => callback(null, key.getPublicKey()), callback);
      };
      const options = { issuer, audience, algorithms: [s.alg as Algorithm], clockTimestamp: seconds(now), complete: true as const };
      const decoded = await new Promise<jsonwebtoken.Jwt>((resolve, reject) =>
        jsonwebtoken.verify(token, getKey, options, (error, result) => (error ? reject(error) : resolve(result as jsonwebtoken.Jwt))),
      );
      return { header: { ...decoded.header }, payload: { ...(decoded.payload as JwtPayload) } };
    };
  },
  failure: (error) => {
    if (!(error instanceof Error)) return "other";
    if (error.name === "TokenExpiredError") return "expired";
    if (error.message === "invalid signature") return "signature";
    if (error.message.startsWith("jwt audience invalid")) return "audience";
    if (error.message.startsWith("jwt issuer invalid")) return "issuer";
    if (/^Unknown key type|is not a valid algorithm/.test(error.message)) return "unsupported";
    return "other";
  },
};

/** What fast-jwt hands its key resolver: the decoded, not yet verified, token. */
interface DecodedToken {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
}

/** How a fast-jwt key resolver turns get-jwks' answer into a key fast-jwt reads (PEM). */
type GetJwksKey = (getJwks: buildGetJwks.GetJwks, signature: buildGetJwks.JWKSignature) => Promise<string>;

/**
 * fast-jwt with get-jwks: the key by `kid` and `alg` from the JWKS that discovery names, for the
 * trusted issuer only; `toPem` is how the JWK becomes the PEM that fast-jwt takes.
 */
function fastJwtVerifier(name: string, algs: readonly SigningAlg[], toPem: GetJwksKey): Verifier {
  return {
    name,
    algs,
    build: (s) => {
      const getJwks = buildGetJwks({ providerDiscovery: true, issuersWhitelist: [s.issuer] });
      return async (token, { issuer, audience, now }) => {
        const verify = createVerifier({
          key: async ({ header, payload }: DecodedToken) => toPem(getJwks, { domain: String(payload.iss), alg: String(header.alg), kid: String(header.kid) }),
          algorithms: [s.alg as never],
          allowedIss: issuer,
          allowedAud: audience,
          checkTyp: "at+jwt",
          clockTimestamp: now?.getTime(),
          complete: true,
        });
        const { header, payload } = (await verify(token)) as VerifiedToken;
        return { header, payload };
      };
    },
    failure: (error) => {
      if (!(error instanceof TokenError)) return "other";
      if (error.code === TokenError.codes.invalidSignature) return "signature";
      if (error.code === TokenError.codes.expired) return "expired";
      if (error.code === TokenError.codes.invalidClaimValue && error.message.includes("aud claim")) return "audience";
      if (error.code === TokenError.codes.invalidClaimValue && error.message.includes("iss claim")) return "issuer";
      const cause = (error as TokenError & { originalError?: unknown }).originalError;
      if (error.code === TokenError.codes.keyFetchingError && cause instanceof Error && cause.message.startsWith("Unsupported key type")) {
        return "unsupported";
      }
      return "other";
    },
  };
}

/** The verifier libraries a resource server brings. */
export const VERIFIERS: Verifier[] = [
  joseVerifier,
  jsonwebtokenVerifier,
  // get-jwks' own getPublicKey converts with jwk-to-pem, which knows RSA and EC keys only.
  fastJwtVerifier("fast-jwt + get-jwks getPublicKey", ["RS256", "ES256"], (getJwks, signature) => getJwks.getPublicKey(signature)),
  // getJwk with node:crypto reads any JWK, Ed25519 included.
  fastJwtVerifier("fast-jwt + get-jwks getJwk", ALGS, async (getJwks, signature) =>
    createPublicKey({ key: await getJwks.getJwk(signature), format: "jwk" })
      .export({ type: "spki", format: "pem" })
      .toString(),
  ),
];

/** The reason `promise` was refused with; fails the test when it resolves. */
export async function refusal(verifier: Verifier, promise: Promise<unknown>): Promise<Failure> {
  try {
    await promise;
  } catch (error) {
    return verifier.failure(error);
  }
  throw new Error(`${verifier.name} accepted a token it should refuse`);
}

// --- Forged tokens ----------------------------------------------------------------------------

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** The token with one claim changed and the original signature kept. */
export function tamperedToken(token: string, claims: Record<string, unknown>): string {
  const [header, , signature] = token.split(".");
  return `${header}.${b64url({ ...decodeJwt(token), ...claims })}.${signature}`;
}

/** The same header (alg, kid, typ) and claims, signed by a fresh key of the same algorithm that the issuer never saw. */
export async function foreignToken(token: string): Promise<string> {
  const header = decodeProtectedHeader(token);
  const { privateKey } = await generateKeyPair(header.alg as string);
  return new SignJWT(decodeJwt(token)).setProtectedHeader({ alg: header.alg as string, kid: header.kid, typ: header.typ }).sign(privateKey);
}
