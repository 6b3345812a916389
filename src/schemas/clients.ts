/** @module schemas/clients — request and response bodies of /v1/providers/{providerId}/clients. */
import { Type, type Static } from "@sinclair/typebox";
import { DateTime, Text, Uuid } from "./common.ts";

export const ClientCreate = Type.Object(
  { name: Text(200, "Name of the client."), audience: Text(200, "Audience of the client: the `aud` of its tokens.") },
  { additionalProperties: false },
);
export const ClientPatch = Type.Object(
  { name: Type.Optional(Text(200, "Name of the client.")), audience: Type.Optional(Text(200, "Audience of the client.")) },
  { additionalProperties: false },
);
export const Client = Type.Object(
  {
    id: Uuid("Unique identifier of the client: the `sub` and `client_id` of its tokens."),
    providerId: Uuid("The provider the client belongs to."),
    name: Type.String(),
    audience: Type.String(),
    createdAt: DateTime("When the client was created (UTC)."),
    tokensRevokedBefore: Type.Optional(
      DateTime("Set by revoke-tokens: the client's tokens issued before this instant (UTC) are no longer active, also within the same second."),
    ),
  },
  { additionalProperties: false },
);
export const ClientParams = Type.Object(
  { providerId: Uuid("The provider's identifier."), clientId: Uuid("The client's identifier.") },
  { additionalProperties: false },
);

export type ClientCreate = Static<typeof ClientCreate>;
export type ClientPatch = Static<typeof ClientPatch>;
export type Client = Static<typeof Client>;
