/**
 * @module cli/projects — `tokenmint projects create|list`, and the `--project` option that points
 * `apikeys` and `keys` at a project other than the default one.
 */
import { createProject, newProjectRecord, type InstanceSettings, type NewProject } from "../core/projects.ts";
import { SIGNING_ALGS, type SigningAlg } from "../config/schema.ts";
import type { AppContext } from "../context.ts";
import { AppError } from "../errors.ts";
import { projectView } from "../http/views.ts";
import { UsageError, type ParsedArgs } from "./args.ts";
import { table, type Output } from "./output.ts";

/** The project `--project SLUG|ID` names, or the default project. */
export async function targetProject(ctx: AppContext, args: ParsedArgs): Promise<string> {
  const wanted = args.values["--project"];
  if (wanted === undefined) return ctx.projectId;
  await ctx.projects.refresh();
  // Slugs are lowercase and ids case-insensitive, as in hosts and API paths.
  const name = wanted.toLowerCase();
  const found = ctx.projects.ids.map((id) => ctx.projects.get(id)).find((p) => p.slug === name || p.id === name);
  if (found === undefined) throw noProject(wanted);
  return found.id;
}

/** The failure of a `--project` that names no project. */
export const noProject = (wanted: string) => new AppError("not_found", `no project '${wanted}'; see 'tokenmint projects list'`);

function wholeSeconds(flag: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d{1,9}$/.test(raw)) throw new UsageError(`${flag} must be a whole number of seconds`);
  return Number(raw);
}

/**
 * The project `projects create` asks for. Every problem with it is a usage error (exit 2), found
 * before the data directory is opened: a refused create changes and creates nothing.
 */
export function projectCreateInput(args: ParsedArgs, instance: InstanceSettings, now: number): NewProject {
  const slug = args.values["--slug"];
  const name = args.values["--name"] ?? slug;
  if (slug === undefined || name === undefined) throw new UsageError("usage: tokenmint projects create --slug SLUG [--name NAME] [...]; see 'tokenmint projects --help'");
  const alg = args.values["--signing-alg"];
  if (alg !== undefined && !SIGNING_ALGS.includes(alg as SigningAlg)) throw new UsageError(`--signing-alg must be one of ${SIGNING_ALGS.join(", ")}`);
  const input: NewProject = {
    slug,
    name,
    signingAlg: alg as SigningAlg | undefined,
    keyRotationPeriod: wholeSeconds("--key-rotation-period", args.values["--key-rotation-period"]),
    defaultTokenLifetime: wholeSeconds("--default-token-lifetime", args.values["--default-token-lifetime"]),
    customDomain: args.values["--custom-domain"],
  };
  try {
    newProjectRecord(input, instance, now);
  } catch (error) {
    // The core names fields as the API does (keyRotationPeriod); the CLI names its flags.
    if (error instanceof AppError) throw new UsageError(flagNames(error.message.replace(/\.$/, "")));
    throw error;
  }
  return input;
}

const FLAG_OF: Readonly<Record<string, string>> = {
  slug: "--slug",
  name: "--name",
  keyRotationPeriod: "--key-rotation-period",
  defaultTokenLifetime: "--default-token-lifetime",
  customDomain: "--custom-domain",
};
const flagNames = (message: string) => message.replace(/^(slug|name|keyRotationPeriod|defaultTokenLifetime|customDomain)\b/, (field) => FLAG_OF[field] ?? field);

export async function projectsCommand(ctx: AppContext, args: ParsedArgs, io: Output): Promise<void> {
  const [, action] = args.words;
  const asJson = args.switches.has("--json");
  switch (action) {
    case "create": {
      // The keys are stored with the project: a running server that picks it up has them at once.
      const record = await createProject(ctx.store, projectCreateInput(args, ctx.instance, ctx.clock.now()), ctx.instance, ctx.clock.now(), (id, policy) =>
        ctx.keys.newKeySet(id, policy),
      );
      await ctx.projects.refresh();
      await ctx.keys.load(record.id);
      const view = projectView(ctx.projects.get(record.id));
      if (asJson) io.out(JSON.stringify(view));
      else io.out(`Created project ${view.slug} (${view.id}), issuer ${view.issuer}. Next: tokenmint apikeys create --project ${view.slug} --name NAME`);
      return;
    }
    case "list": {
      await ctx.projects.refresh();
      const views = ctx.projects.ids.map((id) => projectView(ctx.projects.get(id)));
      if (asJson) io.out(JSON.stringify({ items: views }));
      else io.out(table(["SLUG", "ID", "NAME", "ISSUER", "ALG"], views.map((p) => [p.slug, p.id, p.name, p.issuer, p.signingAlg])));
      return;
    }
    default:
      throw new UsageError(`unknown projects command '${action ?? ""}': use create or list`);
  }
}
