/** @module schemas/client-jwks — bodies of /v1/providers/{providerId}/clients/{clientId}/jwks (private_key_jwt keys). */
import { Type, type Static } from "@sinclair/typebox";

const member = (description: string) => Type.Optional(Type.String({ description }));

/**
 * A JWK as sent: checked member by member by core/client-jwks.ts, which names the key and the
 * problem (a private member, a symmetric key, a short RSA modulus...).
 */
const JwkInput = Type.Object({}, { additionalProperties: true, description: "A public JWK: RSA (2048 bits or more), EC (P-256, P-384, P-521) or OKP (Ed25519)." });

export const ClientJwksPut = Type.Object(
  {
    keys: Type.Array(JwkInput, {
      minItems: 1,
      maxItems: 5,
      description: "1 to 5 public keys; `kid` optional (the RFC 7638 thumbprint when absent) and unique; `use`, if given, `sig`.",
      errorMessage: "must be a list of 1 to 5 JWK objects",
    }),
  },
  { additionalProperties: false },
);

/** A stored public key: only these members, never a private one. */
export const ClientJwk = Type.Object(
  {
    kty: Type.Union([Type.Literal("RSA"), Type.Literal("EC"), Type.Literal("OKP")]),
    kid: Type.String({ description: "As registered, or the RFC 7638 SHA-256 thumbprint of the key." }),
    use: Type.Optional(Type.Literal("sig")),
    alg: member("As registered: the only alg this key verifies."),
    n: member("RSA modulus."),
    e: member("RSA exponent."),
    crv: member("Curve of an EC or OKP key."),
    x: member("EC or OKP public point."),
    y: member("EC public point."),
  },
  { additionalProperties: false },
);
export const ClientJwks = Type.Object(
  { keys: Type.Array(ClientJwk, { description: "The client's public keys (a JWK Set)." }) },
  { additionalProperties: false },
);

export type ClientJwksPut = Static<typeof ClientJwksPut>;
export type ClientJwk = Static<typeof ClientJwk>;
export type ClientJwks = Static<typeof ClientJwks>;
