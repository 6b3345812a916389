/**
 * @module schemas/oauth — the token endpoint's form parameters and answers (RFC 6749 §4.4, §5).
 * Names stay as the RFC spells them. Parameters are form-encoded; an empty value counts as
 * absent, a repeated one arrives as a list and fails "must be given once", and unrecognised
 * parameters are ignored (RFC 6749 §3.2).
 */
import { Type, type Static } from "@sinclair/typebox";

const param = (description: string) => Type.String({ description, errorMessage: "must be given once" });

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
    audience: Type.Optional(param("Optional. Must equal the client's audience; the token's `aud` is always the client's audience.")),
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
/** The error body of every non-2xx answer under /oauth/ (RFC 6749 §5.2). */
export const OAuthErrorBody = Type.Object(
  {
    error: Type.String({ description: "RFC 6749 error code, e.g. `invalid_request`, `invalid_client` (see docs/errors.md)." }),
    error_description: Type.String({ description: "What went wrong and what to do, for a person." }),
  },
  { additionalProperties: false },
);

export type OAuthTokenRequest = Static<typeof OAuthTokenRequest>;
