/**
 * @module http/routes/health
 * Liveness (`/healthz`: the process answers) and readiness (`/readyz`: the store answers and the
 * signing keys are loaded). Neither is logged nor authenticated. Both are answered by the direct
 * lane (http/direct.ts): a process that has just started answers them, as it answers tokens,
 * without waiting for the first request through the app to compile its pipeline.
 */
import type { AppContext } from "../../context.ts";
import { AppError } from "../../errors.ts";
import { Liveness, Readiness } from "../../schemas/discovery.ts";
import type { RouteDef } from "../route.ts";

/**
 * The health paths, with or without a trailing slash (the router takes both): never logged,
 * answered whatever the Host, and while draining (`/healthz` 200 while the process is up,
 * `/readyz` 503).
 */
export const HEALTH_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz", "/healthz/", "/readyz/"]);

export function healthRoutes(ctx: AppContext): RouteDef[] {
  const base = { method: "GET" as const, tag: "health", auth: false, errors: [], direct: true };
  return [
    { ...base, path: "/healthz", operationId: "getHealth", summary: "Liveness", success: { status: 200, schema: Liveness, description: "The process is up." }, handler: () => ({ status: "ok" }) },
    {
      ...base,
      path: "/readyz",
      operationId: "getReadiness",
      summary: "Readiness",
      success: { status: 200, schema: Readiness, description: "The store is reachable and the signing keys are loaded." },
      errors: [503],
      handler: async () => {
        try {
          await ctx.store.getMeta("format");
          ctx.keys.ring(ctx.projectId);
        } catch {
          throw new AppError("unavailable", "Not ready: the store or the signing keys are not available.");
        }
        if (ctx.draining) throw new AppError("unavailable", "Not ready: the service is shutting down.");
        return { status: "ready" };
      },
    },
  ];
}
