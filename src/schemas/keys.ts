/** @module schemas/keys — public metadata of signing keys (never key material). */
import { Type, type Static } from "@sinclair/typebox";
import { DateTime } from "./common.ts";

export const KeyInfo = Type.Object(
  {
    kid: Type.String({ description: "Key id: the RFC 7638 thumbprint of the public key." }),
    alg: Type.Union([Type.Literal("RS256"), Type.Literal("ES256"), Type.Literal("EdDSA")]),
    state: Type.Union([Type.Literal("next"), Type.Literal("current"), Type.Literal("retired")]),
    createdAt: DateTime("When the key was generated and published."),
    activatesAt: Type.Optional(DateTime("When the key started signing (for `next`: when the timer will promote it).")),
    retiredAt: Type.Optional(DateTime("When the key stopped signing.")),
    removedFromJwksAt: Type.Optional(DateTime("When the retired key leaves the JWKS (its last token has expired by then).")),
  },
  { additionalProperties: false },
);
export const KeyList = Type.Object({ items: Type.Array(KeyInfo) }, { additionalProperties: false });
export const KeyParams = Type.Object(
  { kid: Type.String({ pattern: "^[A-Za-z0-9_-]{1,128}$", description: "Key id.", errorMessage: "must be a key id as listed by GET /v1/keys" }) },
  { additionalProperties: false },
);

export type KeyInfo = Static<typeof KeyInfo>;
