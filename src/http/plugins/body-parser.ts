/**
 * @module http/plugins/body-parser
 * The one body parser: enforces the size limit (413), demands a JSON content type for a non-empty
 * body (415), treats an empty body as `{}`, turns bad JSON into 400, and trims the text fields the
 * contract trims (schemas/common.ts TRIMMED_FIELDS). Runs before validation.
 */
import { Elysia } from "elysia";
import { AppError } from "../../errors.ts";
import { trimTextFields } from "../../schemas/common.ts";

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json(?:\s*;.*)?$/i;

/** Parses a request body per the contract, or throws the matching AppError. */
export async function parseJsonBody(request: Request, maxBytes: number): Promise<unknown> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > maxBytes) throw new AppError("payload_too_large", `The request body is larger than ${maxBytes} bytes.`);
  const bytes = new Uint8Array(await request.arrayBuffer());
  if (bytes.byteLength > maxBytes) throw new AppError("payload_too_large", `The request body is larger than ${maxBytes} bytes.`);
  if (bytes.byteLength === 0) return {};
  if (!JSON_TYPE.test(request.headers.get("content-type") ?? "")) {
    throw new AppError("unsupported_media_type", "The request body must be JSON, sent with 'Content-Type: application/json'.");
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new AppError("invalid_request", "The request body is not valid UTF-8.");
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AppError("invalid_request", "The request body is not valid JSON.");
  }
  return trimTextFields(parsed);
}

/** Registers the parser for every route. */
export const bodyParser = (maxBytes: number) =>
  new Elysia({ name: "body-parser" }).onParse({ as: "global" }, ({ request }) => parseJsonBody(request, maxBytes));
