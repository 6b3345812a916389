/**
 * @module core/oauth/client-auth
 * Client authentication at the OAuth endpoints, by exactly one method: `client_secret_basic`
 * (HTTP Basic with the form-urlencoded client id and secret, RFC 6749 §2.3.1),
 * `client_secret_post` (`client_id` and `client_secret` in the body) or `private_key_jwt`
 * (`client_assertion_type` and `client_assertion` in the body, RFC 7523 §2.2;
 * client-assertion.ts). The client is then found by its id among all providers of the project,
 * and the secret compared with its stored hashes, or the assertion verified with its registered
 * public keys. Every failure to authenticate is `invalid_client` (401, with the Basic challenge);
 * sending two methods, a body `client_id` that differs from the one authenticated, or half of the
 * assertion parameters is `invalid_request`. authenticateClient is the one entry point.
 */
import type { AppContext } from "../../context.ts";
import type { ClientRecord, Store } from "../../store/store.ts";
import { clientSecretMatches } from "../client-secrets.ts";
import { isUuid } from "../ids.ts";
import { decodeUtf8Strict } from "../utf8.ts";
import { assertionClientId, CLIENT_ASSERTION_TYPE, NO_CLIENT_KEYS, verifyClientAssertion, type AssertionCheck } from "./client-assertion.ts";
import { invalidClient, OAuthError } from "./errors.ts";

/** The client authentication methods of the OAuth endpoints, as discovery names them. */
export const CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt"] as const;
export type ClientAuthMethod = (typeof CLIENT_AUTH_METHODS)[number];

/** What a request presents to authenticate its client, by method. */
export type ClientCredentials =
  | { method: "client_secret_basic" | "client_secret_post"; clientId: string; secret: string }
  /** `clientId` is the assertion's (not yet verified) `sub`. */
  | { method: "private_key_jwt"; clientId: string; assertion: string };

/** The body parameters client authentication reads (others are ignored). */
export interface ClientAuthParams {
  client_id?: string;
  client_secret?: string;
  client_assertion_type?: string;
  client_assertion?: string;
}

/** What authentication needs beyond the request. */
export interface ClientAuthOptions {
  /**
   * The acceptable `aud` values of a client assertion: the issuer and the URL of the endpoint
   * that receives the request (e.g. `[issuer, issuer + "/oauth/token"]`).
   */
  assertionAudiences: readonly string[];
}

/** Whether two client ids name the same client: equal, or the same UUID in another case. */
const sameClientId = (a: string, b: string) => a === b || (isUuid(a) && a.toLowerCase() === b.toLowerCase());

const MALFORMED_BASIC = "Malformed Authorization header: expected 'Basic base64(urlencode(client_id):urlencode(client_secret))'.";

/** application/x-www-form-urlencoded decoding of one Basic credential (RFC 6749 §2.3.1). */
function formDecode(value: string): string {
  // Most credentials are plain base64url or UUID text: nothing to decode.
  if (!value.includes("%") && !value.includes("+")) return value;
  try {
    return decodeURIComponent(value.replaceAll("+", " "));
  } catch {
    throw invalidClient(MALFORMED_BASIC);
  }
}

/** The client id and secret of an `Authorization: Basic` header, or invalid_client. */
export function parseBasicCredentials(authorization: string): { clientId: string; secret: string } {
  const match = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(authorization);
  if (match === null || (match[1] as string).length % 4 !== 0) throw invalidClient(MALFORMED_BASIC);
  let decoded: string;
  try {
    const binary = atob(match[1] as string);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    decoded = decodeUtf8Strict(bytes);
  } catch {
    throw invalidClient(MALFORMED_BASIC);
  }
  const colon = decoded.indexOf(":");
  if (colon < 0) throw invalidClient(MALFORMED_BASIC);
  const clientId = formDecode(decoded.slice(0, colon));
  const secret = formDecode(decoded.slice(colon + 1));
  if (clientId === "" || secret === "") throw invalidClient(MALFORMED_BASIC);
  return { clientId, secret };
}

const ONE_METHOD = "Use one client authentication method: HTTP Basic, client_secret in the body, or a client_assertion; not two.";

/** Reads a private_key_jwt assertion from the body parameters (RFC 7521 §4.2). */
function readAssertion(authorization: string | null, params: ClientAuthParams): ClientCredentials {
  if (authorization !== null || params.client_secret !== undefined) throw new OAuthError("invalid_request", ONE_METHOD);
  if (params.client_assertion === undefined) throw new OAuthError("invalid_request", "client_assertion_type was sent without client_assertion.");
  if (params.client_assertion_type !== CLIENT_ASSERTION_TYPE) {
    throw new OAuthError("invalid_request", `client_assertion needs client_assertion_type=${CLIENT_ASSERTION_TYPE}.`);
  }
  const clientId = assertionClientId(params.client_assertion);
  if (params.client_id !== undefined && !sameClientId(params.client_id, clientId)) {
    throw new OAuthError("invalid_request", "The client_id parameter differs from the iss and sub of the client_assertion.");
  }
  return { method: "private_key_jwt", clientId, assertion: params.client_assertion };
}

/** Reads the credentials of exactly one method from the Authorization header and the body parameters. */
export function readClientCredentials(authorization: string | null, params: ClientAuthParams): ClientCredentials {
  if (params.client_assertion !== undefined || params.client_assertion_type !== undefined) return readAssertion(authorization, params);
  if (authorization !== null) {
    if (params.client_secret !== undefined) throw new OAuthError("invalid_request", ONE_METHOD);
    const basic = parseBasicCredentials(authorization);
    if (params.client_id !== undefined && !sameClientId(params.client_id, basic.clientId)) {
      throw new OAuthError("invalid_request", "The client_id parameter differs from the client id of the Authorization header.");
    }
    return { method: "client_secret_basic", ...basic };
  }
  if (params.client_id === undefined || params.client_secret === undefined) {
    throw invalidClient(
      "Client authentication is required: send 'Authorization: Basic ...' (client_secret_basic), client_id and client_secret in the body (client_secret_post), or client_assertion_type and client_assertion (private_key_jwt).",
    );
  }
  return { method: "client_secret_post", clientId: params.client_id, secret: params.client_secret };
}

/** The client the credentials prove, or invalid_client. Unknown client and wrong secret look alike. */
async function verifiedClient(store: Store, projectId: string, credentials: ClientCredentials, check: AssertionCheck): Promise<ClientRecord> {
  const client = isUuid(credentials.clientId) ? await store.getClientById(projectId, credentials.clientId.toLowerCase()) : undefined;
  if (credentials.method === "private_key_jwt") {
    if (client === undefined) throw invalidClient(NO_CLIENT_KEYS);
    await verifyClientAssertion(store, client, credentials.assertion, check);
    return client;
  }
  if (client === undefined || !(await clientSecretMatches(store, client, credentials.secret))) {
    throw invalidClient("Client authentication failed: unknown client or wrong secret.");
  }
  return client;
}

/**
 * Authenticates the client of an OAuth request from its Authorization header (null when absent)
 * and its form parameters: the one entry point of every OAuth endpoint. Returns the client, or
 * throws OAuthError (invalid_client, or invalid_request for a malformed combination).
 */
export async function authenticateClient(
  ctx: Pick<AppContext, "store" | "clock">,
  projectId: string,
  authorization: string | null,
  params: ClientAuthParams,
  options: ClientAuthOptions,
): Promise<ClientRecord> {
  const credentials = readClientCredentials(authorization, params);
  return verifiedClient(ctx.store, projectId, credentials, { audiences: options.assertionAudiences, now: ctx.clock.now() });
}
