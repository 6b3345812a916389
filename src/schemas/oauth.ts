/**
 * @module schemas/oauth — the form parameters and answers of the token endpoint (RFC 6749 §4.4,
 * §5), the introspection endpoint (RFC 7662) and the revocation endpoint (RFC 7009).
 * Names stay as the RFC spells them. Parameters are form-encoded; an empty value counts as
 * absent, a repeated one arrives as a list and fails "must be given once" (except `audience` and
 * `resource`, which their RFCs let a request repeat), and unrecognised parameters are ignored
 * (RFC 6749 §3.2).
 */
import { Type, type Static } from "@sinclair/typebox";

const param = (description: string) => Type.String({ description, errorMessage: "must be given once" });
/** A parameter its RFC lets a request repeat: one value, or the list of them. */
const repeatable = (description: string) => Type.Union([Type.String(), Type.Array(Type.String())], { description });

export const OAuthTokenRequest = Type.Object(
  {
    grant_type: param("Must be `client_credentials`."),
    client_id: Type.Optional(
      param("The client's id. With client_secret_post; with HTTP Basic or a client_assertion it may be repeated here, and must then match."),
    ),
    client_secret: Type.Optional(param("A secret of the client (client_secret_post). Never together with HTTP Basic.")),
    client_assertion_type: Type.Optional(param("`urn:ietf:params:oauth:client-assertion-type:jwt-bearer` with client_assertion (private_key_jwt).")),
    client_assertion: Type.Optional(
      param("A JWT signed with one of the client's registered keys (private_key_jwt): iss = sub = client id, aud = issuer or token endpoint, exp, jti."),
    ),
    audience: Type.Optional(
      repeatable("Optional, and may be repeated (RFC 8693). Each value must equal the client's audience; the token's `aud` is always the client's audience."),
    ),
    resource: Type.Optional(repeatable("Optional, and may be repeated (RFC 8707). Each value must be an absolute URI without a fragment and equal the client's audience.")),
    scope: Type.Optional(param("Not supported: tokens carry no scope. A request with a scope is refused with `invalid_scope`.")),
  },
  { additionalProperties: true },
);
export const OAuthTokenResponse = Type.Object(
  {
    access_token: Type.String({ description: "The signed JWT: the same token as POST /v1/.../tokens with the default lifetime." }),
    token_type: Type.Literal("Bearer"),
    expires_in: Type.Integer({ description: "Lifetime of the token in seconds." }),
  },
  { additionalProperties: false },
);
/** The error body of every non-2xx answer of the OAuth endpoints (RFC 6749 §5.2). */
export const OAuthErrorBody = Type.Object(
  {
    error: Type.String({ description: "RFC 6749 error code, e.g. `invalid_request`, `invalid_client` (see docs/errors.md)." }),
    error_description: Type.String({ description: "What went wrong and what to do, for a person." }),
  },
  { additionalProperties: false },
);

/** The parameters of introspection and revocation: the token, and client authentication as at the token endpoint. */
export const OAuthTokenStatusRequest = Type.Object(
  {
    token: param("The access token."),
    token_type_hint: Type.Optional(param("Optional and ignored: every token here is an access token (unknown hints are ignored too).")),
    client_id: Type.Optional(param("The calling client's id. With client_secret_post; with HTTP Basic it may be repeated here, and must then match.")),
    client_secret: Type.Optional(param("A secret of the calling client (client_secret_post). Never together with HTTP Basic.")),
    client_assertion_type: Type.Optional(param("`urn:ietf:params:oauth:client-assertion-type:jwt-bearer` with client_assertion (private_key_jwt).")),
    client_assertion: Type.Optional(
      param("A JWT signed with one of the calling client's registered keys (private_key_jwt): iss = sub = client id, aud = issuer, token endpoint or this endpoint's URL, exp, jti."),
    ),
  },
  { additionalProperties: true },
);
/** RFC 7662 §2.2: `{active: false}` alone for an inactive token, the token's claims for an active one. */
export const OAuthIntrospectionResponse = Type.Object(
  {
    active: Type.Boolean({ description: "Whether the token is active now: signed by this issuer's keys, not expired and not revoked." }),
    client_id: Type.Optional(Type.String({ description: "The client the token was issued to." })),
    sub: Type.Optional(Type.String({ description: "The token's subject: the client's id." })),
    aud: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description: "The token's audience, as in the token." })),
    iss: Type.Optional(Type.String({ description: "The token's issuer." })),
    exp: Type.Optional(Type.Integer({ description: "Expiry, seconds since the epoch." })),
    iat: Type.Optional(Type.Integer({ description: "Issue time, seconds since the epoch." })),
    jti: Type.Optional(Type.String({ description: "The token's unique id." })),
    token_type: Type.Optional(Type.Literal("Bearer")),
  },
  { additionalProperties: false },
);

export type OAuthTokenRequest = Static<typeof OAuthTokenRequest>;
export type OAuthTokenStatusRequest = Static<typeof OAuthTokenStatusRequest>;
