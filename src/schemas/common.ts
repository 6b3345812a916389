/**
 * @module schemas/common
 * Building blocks shared by the request and response schemas. Each schema is written once and
 * drives validation, the TypeScript type and the OpenAPI document.
 */
import { Type, type TSchema } from "@sinclair/typebox";
import { UUID_PATTERN } from "../core/ids.ts";
import { plainTextPattern } from "../core/text.ts";

/**
 * A string of `min` to `max` characters without control characters. Characters are Unicode code
 * points (an emoji is one), as JSON Schema counts them: the check is a regular expression with the
 * `u` flag, where TypeBox's `maxLength` would count UTF-16 units. The OpenAPI document shows it as
 * a string with `minLength`, `maxLength` and `pattern` (http/openapi.ts).
 */
export const Chars = (min: number, max: number, options: { description: string; errorMessage: string }) =>
  Type.RegExp(plainTextPattern(min, max), { ...options, "x-characters": { min, max } });

/**
 * A required free-text field: trimmed before validation (TRIMMED_FIELDS), then 1..max characters,
 * no control characters. The OpenAPI document shows the pattern of the text as sent.
 */
export const Text = (max: number, description: string) =>
  Type.RegExp(plainTextPattern(1, max), {
    description,
    errorMessage: `must be a string of 1 to ${max} characters (after trimming) without control characters`,
    "x-characters": { min: 1, max },
    "x-trimmed": true,
  });

/**
 * Body fields that CONTRACT §2 trims before validation (`name` of providers and clients, `audience`
 * of clients). Validation runs on the raw JSON, so the body parser trims them first; a schema
 * keyword could not, because TypeBox checks the value as sent.
 */
export const TRIMMED_FIELDS: readonly string[] = ["name", "audience"];

/** Trims the TRIMMED_FIELDS string members of a top-level JSON object, in place; returns `body`. */
export function trimTextFields(body: unknown): unknown {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return body;
  const record = body as Record<string, unknown>;
  for (const field of TRIMMED_FIELDS) {
    const value = record[field];
    if (typeof value === "string") record[field] = value.trim();
  }
  return body;
}

/** The body of an action that takes no input: nothing, or `{}`. */
export const EmptyBody = Type.Object({}, { additionalProperties: false, description: "No fields: send no body, or `{}`." });

export const Uuid = (description: string) =>
  Type.String({ pattern: UUID_PATTERN, description, errorMessage: "must be a UUID such as 0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d" });

export const DateTime = (description: string) => Type.String({ format: "date-time", description });

/** The error body of every non-2xx answer. */
export const ErrorBody = Type.Object(
  {
    code: Type.String({ description: "Stable machine-readable error code (see docs/errors.md)." }),
    message: Type.String({ description: "What went wrong and what to do, for a person." }),
  },
  { additionalProperties: false, $id: "#/components/schemas/Error" },
);

/** Query of every listing. */
export const PageQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.String({ pattern: "^(100|[1-9][0-9]?)$", description: "Page size, 1 to 100 (default 50).", errorMessage: "must be a whole number from 1 to 100" }),
    ),
    cursor: Type.Optional(
      Type.String({ pattern: "^[A-Za-z0-9_-]{1,64}$", description: "The `nextCursor` of the previous page.", errorMessage: "must be a nextCursor value from a previous page" }),
    ),
  },
  { additionalProperties: false },
);

/** A page of items with the cursor of the next page (null on the last page). */
export const PageOf = <T extends TSchema>(item: T) =>
  Type.Object(
    { items: Type.Array(item), nextCursor: Type.Union([Type.String(), Type.Null()], { description: "Pass as `cursor` for the next page; null when this is the last page." }) },
    { additionalProperties: false },
  );
