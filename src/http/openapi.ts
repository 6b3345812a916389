/**
 * @module http/openapi
 * The OpenAPI 3.1 document, generated from the route table: the same TypeBox schemas that
 * validate requests and responses describe them here.
 */
import type { TSchema } from "@sinclair/typebox";
import { ERROR_TABLE } from "../errors.ts";
import { ErrorBody } from "../schemas/common.ts";
import type { RouteDef } from "./route.ts";

const json = (schema: TSchema) => ({ "application/json": { schema: strip(schema) } });

/** Drops TypeBox's symbol keys and our `errorMessage` extension by a JSON round trip. */
const strip = (schema: TSchema): unknown =>
  JSON.parse(JSON.stringify(schema, (key, value) => (key === "errorMessage" || key === "$id" ? undefined : value)));

function parameters(route: RouteDef): unknown[] {
  const list: unknown[] = [];
  for (const [where, schema] of [["path", route.params], ["query", route.query]] as const) {
    const properties = (schema as { properties?: Record<string, TSchema> } | undefined)?.properties ?? {};
    const required = new Set((schema as { required?: string[] } | undefined)?.required ?? []);
    for (const [name, property] of Object.entries(properties)) {
      list.push({ name, in: where, required: where === "path" || required.has(name), description: property.description, schema: strip(property) });
    }
  }
  return list;
}

/** Builds the document for `routes`. */
export function openApiDocument(routes: readonly RouteDef[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const universal = [401, 405, 500, 503];
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    const responses: Record<string, unknown> = {
      [route.success.status]: { description: route.success.description, ...(route.success.schema ? { content: json(route.success.schema) } : {}) },
    };
    for (const status of [...route.errors, ...(route.auth ? universal : [500])].sort()) {
      const entry = Object.entries(ERROR_TABLE).find(([, v]) => v.status === status);
      responses[status] = { description: entry ? `\`${entry[0]}\`: ${entry[1].message}` : "Error", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } };
    }
    (paths[path] ??= {})[route.method.toLowerCase()] = {
      summary: route.summary,
      tags: [route.tag],
      ...(route.auth ? {} : { security: [] }),
      parameters: parameters(route),
      ...(route.body ? { requestBody: { required: false, content: json(route.body) } } : {}),
      responses,
    };
  }
  return {
    openapi: "3.1.0",
    info: { title: "tokenmint", version, description: "Machine-to-machine JWT access tokens with rotating signing keys." },
    security: [{ apiKey: [] }],
    components: { securitySchemes: { apiKey: { type: "http", scheme: "bearer", description: "A management API key." } }, schemas: { Error: strip(ErrorBody) } },
    paths,
  };
}
