/**
 * @module schemas/discovery — the public documents (the JWKS, the discovery document, the health
 * answers), for the OpenAPI document and the tests that check the answers against it. The JWKS
 * and discovery handlers answer bodies serialized once per key ring; these schemas describe them
 * (the discovery document is built as this schema's type, so the two cannot drift apart).
 */
import { Type } from "@sinclair/typebox";

const Url = (description: string) => Type.String({ format: "uri", description });
const Names = (description: string) => Type.Array(Type.String(), { description });

/** A public signing key: the members RFC 7517/7518/8037 give it, never private ones. */
export const PublicJwk = Type.Object(
  {
    kty: Type.Union([Type.Literal("RSA"), Type.Literal("EC"), Type.Literal("OKP")]),
    kid: Type.String({ description: "Key id: the RFC 7638 thumbprint of the public key." }),
    alg: Type.Union([Type.Literal("RS256"), Type.Literal("ES256"), Type.Literal("EdDSA")]),
    use: Type.Literal("sig"),
    n: Type.Optional(Type.String({ description: "RSA modulus (base64url)." })),
    e: Type.Optional(Type.String({ description: "RSA exponent (base64url)." })),
    crv: Type.Optional(Type.Union([Type.Literal("P-256"), Type.Literal("Ed25519")])),
    x: Type.Optional(Type.String({ description: "EC or OKP public x (base64url)." })),
    y: Type.Optional(Type.String({ description: "EC public y (base64url)." })),
  },
  { additionalProperties: false },
);

export const Jwks = Type.Object(
  { keys: Type.Array(PublicJwk, { description: "The current key, the next key and every retired key whose tokens may still be valid." }) },
  { additionalProperties: false },
);

export const DiscoveryDocument = Type.Object(
  {
    issuer: Url("The issuer (`iss`) of this host's project: the URL this document is served under, no trailing slash."),
    jwks_uri: Url("The JWKS."),
    token_endpoint: Url("The OAuth 2.0 token endpoint (client credentials)."),
    grant_types_supported: Names("`client_credentials`."),
    token_endpoint_auth_methods_supported: Names("How clients authenticate at the token endpoint."),
    introspection_endpoint: Url("RFC 7662 introspection."),
    introspection_endpoint_auth_methods_supported: Names("How clients authenticate at the introspection endpoint."),
    introspection_endpoint_auth_signing_alg_values_supported: Names("Algorithms of private_key_jwt assertions there."),
    revocation_endpoint: Url("RFC 7009 revocation."),
    revocation_endpoint_auth_methods_supported: Names("How clients authenticate at the revocation endpoint."),
    revocation_endpoint_auth_signing_alg_values_supported: Names("Algorithms of private_key_jwt assertions there."),
    response_types_supported: Names("`token`."),
    subject_types_supported: Names("`public`."),
    id_token_signing_alg_values_supported: Names(
      "The algorithms of the keys in the JWKS, and `RS256`, which OpenID Connect Discovery 1.0 §3 requires there whatever the keys (no ID token is issued).",
    ),
    token_endpoint_auth_signing_alg_values_supported: Names("Algorithms of private_key_jwt assertions at the token endpoint."),
    claims_supported: Names("The claims every access token carries."),
  },
  { additionalProperties: false },
);

export const Liveness = Type.Object({ status: Type.Literal("ok") }, { additionalProperties: false });
export const Readiness = Type.Object({ status: Type.Literal("ready") }, { additionalProperties: false });
