/** @module schemas/tokens — the token request and response of POST .../clients/{clientId}/tokens. */
import { Type, type Static } from "@sinclair/typebox";
import { MAX_TOKEN_LIFETIME_S } from "../keys/lifecycle.ts";
import { DateTime } from "./common.ts";

const flag = (description: string) => Type.Optional(Type.Boolean({ description, errorMessage: "must be true or false" }));

export const TokenRequest = Type.Object(
  {
    expiresIn: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_TOKEN_LIFETIME_S,
        description: `Lifetime in seconds, 1 to ${MAX_TOKEN_LIFETIME_S} (48 h). Omitted or 0 means the project's default lifetime (3600 unless the project sets another).`,
        errorMessage: `must be a whole number of seconds from 1 to ${MAX_TOKEN_LIFETIME_S} (0 or omitted means the default lifetime)`,
      }),
    ),
    useJwtType: flag("When true the JWT header `typ` is `JWT` instead of `at+jwt`."),
    audienceAsArray: flag("When true the `aud` claim is a one-element array instead of a string."),
    forceDefaultDomain: flag("When true the `iss` is the project's own URL even if the project has a custom domain (both serve the same keys)."),
  },
  { additionalProperties: false },
);
export const AccessToken = Type.Object(
  {
    accessToken: Type.String({ description: "The signed JWT." }),
    expiresAt: DateTime("Expiry of the token (its `exp`), UTC."),
    type: Type.Literal("Bearer", { description: "Token type for the Authorization header." }),
  },
  { additionalProperties: false },
);

export type TokenRequest = Static<typeof TokenRequest>;
export type AccessToken = Static<typeof AccessToken>;
