/** @module schemas/projects — the caller's project: GET and PATCH /v1/project. */
import { Type, type Static } from "@sinclair/typebox";
import { SIGNING_ALGS } from "../config/schema.ts";
import { MAX_TOKEN_LIFETIME_S } from "../keys/lifecycle.ts";
import { DateTime, Text, Uuid } from "./common.ts";

const signingAlg = Type.Union(
  SIGNING_ALGS.map((alg) => Type.Literal(alg)),
  { description: "Algorithm of the project's signing keys.", errorMessage: `must be one of ${SIGNING_ALGS.join(", ")}` },
);

export const ProjectPatch = Type.Object(
  {
    name: Type.Optional(Text(200, "Name of the project.")),
    signingAlg: Type.Optional(signingAlg),
    keyRotationPeriod: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 31_536_000,
        description: "Seconds between automatic key rotations; 0 turns them off (minimum 60 otherwise).",
        errorMessage: "must be 0 or a whole number of seconds from 60 to 31536000",
      }),
    ),
    defaultTokenLifetime: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_TOKEN_LIFETIME_S,
        description: "Lifetime in seconds of tokens requested without `expiresIn`.",
        errorMessage: `must be a whole number of seconds from 1 to ${MAX_TOKEN_LIFETIME_S}`,
      }),
    ),
    customDomain: Type.Optional(
      Type.String({
        maxLength: 259,
        description: "Host name that also serves the project (its issuer in tokens unless `forceDefaultDomain`); an empty string removes it.",
        errorMessage: 'must be a host name like auth.example.com, or "" to remove it',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Project = Type.Object(
  {
    id: Uuid("Unique identifier of the project."),
    name: Type.String(),
    slug: Type.String({ description: "The project's own host is `<slug>.<base domain>` (the default project: the public URL)." }),
    url: Type.String({ description: "The project's own URL: the `issuer` of discovery at its own host." }),
    customDomain: Type.Union([Type.String(), Type.Null()], { description: "The custom domain, or null when there is none." }),
    issuer: Type.String({ description: "The `iss` of tokens from the management API: the custom domain's URL when set, else `url`." }),
    signingAlg: Type.String({ description: "Algorithm of new signing keys." }),
    keyRotationPeriod: Type.Integer({ description: "Seconds between automatic rotations; 0 = off." }),
    defaultTokenLifetime: Type.Integer({ description: "Lifetime in seconds of tokens requested without `expiresIn`." }),
    createdAt: DateTime("When the project was created (UTC)."),
    updatedAt: DateTime("When the project last changed (UTC)."),
  },
  { additionalProperties: false },
);

export type ProjectPatch = Static<typeof ProjectPatch>;
export type Project = Static<typeof Project>;
