/** @module cli/keys — `tokenmint keys list|rotate|revoke`. */
import type { AppContext } from "../context.ts";
import { keyView } from "../http/views.ts";
import type { KeyView } from "../keys/key-service.ts";
import { UsageError, type ParsedArgs } from "./args.ts";
import { iso, table, type Output } from "./output.ts";
import { targetProject } from "./projects.ts";

function show(keys: KeyView[], asJson: boolean, io: Output): void {
  if (asJson) io.out(JSON.stringify({ items: keys.map(keyView) }));
  else {
    io.out(
      table(
        ["KID", "ALG", "STATE", "CREATED", "ACTIVATES", "RETIRED", "LEAVES JWKS"],
        keys.map((k) => [k.kid, k.alg, k.state, iso(k.createdAt), iso(k.activatesAt), iso(k.retiredAt), iso(k.removedFromJwksAt)]),
      ),
    );
  }
}

export async function keysCommand(ctx: AppContext, args: ParsedArgs, io: Output): Promise<void> {
  const [, action, target] = args.words;
  const asJson = args.switches.has("--json");
  const projectId = await targetProject(ctx, args);
  switch (action) {
    case "list":
      return show(await ctx.keys.list(projectId), asJson, io);
    case "rotate":
      return show(await ctx.keys.rotate(projectId), asJson, io);
    case "revoke":
      if (target === undefined) throw new UsageError("usage: tokenmint keys revoke KID (the kid from 'keys list')");
      return show(await ctx.keys.revoke(projectId, target), asJson, io);
    default:
      throw new UsageError(`unknown keys command '${action ?? ""}': use list, rotate or revoke`);
  }
}
