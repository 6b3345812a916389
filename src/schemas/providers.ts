/** @module schemas/providers — request and response bodies of /v1/providers. */
import { Type, type Static } from "@sinclair/typebox";
import { Chars, DateTime, Text, Uuid } from "./common.ts";

const description = Chars(0, 1000, {
  description: "Optional description, at most 1000 characters.",
  errorMessage: "must be a string of at most 1000 characters without control characters",
});

export const ProviderCreate = Type.Object(
  { name: Text(200, "Name of the provider."), description: Type.Optional(description) },
  { additionalProperties: false },
);
export const ProviderPatch = Type.Object(
  { name: Type.Optional(Text(200, "Name of the provider.")), description: Type.Optional(description) },
  { additionalProperties: false },
);
export const Provider = Type.Object(
  {
    id: Uuid("Unique identifier of the provider."),
    name: Type.String(),
    description: Type.String(),
    createdAt: DateTime("When the provider was created (UTC)."),
  },
  { additionalProperties: false },
);
export const ProviderParams = Type.Object({ providerId: Uuid("The provider's identifier.") }, { additionalProperties: false });

export type ProviderCreate = Static<typeof ProviderCreate>;
export type ProviderPatch = Static<typeof ProviderPatch>;
export type Provider = Static<typeof Provider>;
