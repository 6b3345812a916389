/** @module schemas/client-secrets — bodies of /v1/providers/{providerId}/clients/{clientId}/secrets. */
import { Type, type Static } from "@sinclair/typebox";
import { DateTime, Uuid } from "./common.ts";

const id = Uuid("Identifier of the secret (not part of the secret).");
const lastFour = Type.String({ description: "The last four characters of the secret: a hint to tell secrets apart, not enough to use one." });
const createdAt = DateTime("When the secret was created (UTC).");

/** The create request has no fields yet; an empty body means `{}`. */
export const ClientSecretCreate = Type.Object({}, { additionalProperties: false });
export const ClientSecretCreated = Type.Object(
  {
    id,
    secret: Type.String({ description: "The secret, prefixed `tms_`. Shown only in this answer: only its SHA-256 is stored." }),
    lastFour,
    createdAt,
  },
  { additionalProperties: false },
);
export const ClientSecretInfo = Type.Object({ id, lastFour, createdAt }, { additionalProperties: false });
export const ClientSecretList = Type.Object({ items: Type.Array(ClientSecretInfo) }, { additionalProperties: false });
export const ClientSecretParams = Type.Object(
  { providerId: Uuid("The provider's identifier."), clientId: Uuid("The client's identifier."), secretId: Uuid("The secret's identifier.") },
  { additionalProperties: false },
);

export type ClientSecretCreated = Static<typeof ClientSecretCreated>;
export type ClientSecretInfo = Static<typeof ClientSecretInfo>;
