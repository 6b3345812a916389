/**
 * @module core/oauth/client-auth
 * Client authentication at the token endpoint (RFC 6749 §2.3.1), by exactly one method:
 * `client_secret_basic` (HTTP Basic with the form-urlencoded client id and secret) or
 * `client_secret_post` (`client_id` and `client_secret` in the body). The client is then found by
 * its id among all providers of the project, and the secret compared with its stored hashes.
 * Every failure to authenticate is `invalid_client` (401, with the Basic challenge); sending both
 * methods, or a body `client_id` that differs from the Basic one, is `invalid_request`.
 */
import type { ClientRecord, Store } from "../../store/store.ts";
import { clientSecretMatches } from "../client-secrets.ts";
import { isUuid } from "../ids.ts";
import { invalidClient, OAuthError } from "./errors.ts";

/** The client authentication methods of the token endpoint, as discovery names them. */
export const CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"] as const;
export type ClientAuthMethod = (typeof CLIENT_AUTH_METHODS)[number];

export interface ClientCredentials {
  method: ClientAuthMethod;
  clientId: string;
  secret: string;
}

const MALFORMED_BASIC = "Malformed Authorization header: expected 'Basic base64(urlencode(client_id):urlencode(client_secret))'.";

/** application/x-www-form-urlencoded decoding of one Basic credential (RFC 6749 §2.3.1). */
function formDecode(value: string): string {
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
    decoded = new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(atob(match[1] as string), (c) => c.charCodeAt(0)));
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

/** Reads the credentials of exactly one method from the Authorization header and the body parameters. */
export function readClientCredentials(authorization: string | null, params: { client_id?: string; client_secret?: string }): ClientCredentials {
  if (authorization !== null) {
    if (params.client_secret !== undefined) {
      throw new OAuthError("invalid_request", "Use one client authentication method: HTTP Basic or client_secret in the body, not both.");
    }
    const basic = parseBasicCredentials(authorization);
    if (params.client_id !== undefined && params.client_id !== basic.clientId) {
      throw new OAuthError("invalid_request", "The client_id parameter differs from the client id of the Authorization header.");
    }
    return { method: "client_secret_basic", ...basic };
  }
  if (params.client_id === undefined || params.client_secret === undefined) {
    throw invalidClient(
      "Client authentication is required: send 'Authorization: Basic ...' (client_secret_basic) or client_id and client_secret in the body (client_secret_post).",
    );
  }
  return { method: "client_secret_post", clientId: params.client_id, secret: params.client_secret };
}

/** The client the credentials prove, or invalid_client. Unknown client and wrong secret look alike. */
export async function authenticateClient(store: Store, projectId: string, credentials: ClientCredentials): Promise<ClientRecord> {
  const client = isUuid(credentials.clientId) ? await store.getClientById(projectId, credentials.clientId) : undefined;
  if (client === undefined || !(await clientSecretMatches(store, client, credentials.secret))) {
    throw invalidClient("Client authentication failed: unknown client or wrong secret.");
  }
  return client;
}
