/**
 * @module http/routes/v1/project — the caller's own project: its URLs and settings. An API key
 * sees and changes only the project it belongs to; other projects are managed with the CLI.
 */
import { isEmptyPatch } from "../../../core/patch.ts";
import { resolveProject, updateProject } from "../../../core/projects.ts";
import type { AppContext } from "../../../context.ts";
import { Project, ProjectPatch } from "../../../schemas/projects.ts";
import type { RouteDef } from "../../route.ts";
import { projectView } from "../../views.ts";

export function projectRoutes(ctx: AppContext): RouteDef[] {
  const tag = "project";
  return [
    {
      method: "GET",
      path: "/v1/project",
      operationId: "getProject",
      summary: "Get the caller's project",
      tag,
      auth: true,
      success: { status: 200, schema: Project, description: "The project with its URLs and effective settings." },
      errors: [],
      handler: ({ principal }) => projectView(ctx.projects.get(principal.projectId)),
    },
    {
      method: "PATCH",
      path: "/v1/project",
      operationId: "updateProject",
      summary: "Change the caller's project",
      tag,
      auth: true,
      body: ProjectPatch,
      success: {
        status: 200,
        schema: Project,
        description:
          "The changed project. A new signing algorithm is used after the next key has been published for the JWKS max-age and the key rotates; a custom domain is served at once.",
      },
      errors: [400, 409, 413, 415],
      handler: async ({ principal, body }) => {
        const change = body as ProjectPatch;
        const record = await updateProject(ctx.store, principal.projectId, change, ctx.instance, ctx.clock.now());
        // Nothing changed: the project as stored, with nothing reloaded.
        if (isEmptyPatch(change)) return projectView(resolveProject(record, ctx.instance, ctx.projectId));
        // Served by this process at once (others from their next request on): reload the project
        // into the directory and let the key service apply a new algorithm now.
        await ctx.projects.refreshOnly([principal.projectId]);
        await ctx.keys.tick();
        return projectView(ctx.projects.get(principal.projectId));
      },
    },
  ];
}
