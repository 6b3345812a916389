/** @module cli/apikeys — `tokenmint apikeys create|list|revoke`. */
import { createApiKey, revokeApiKey } from "../core/api-keys.ts";
import { isUuid } from "../core/ids.ts";
import { isPlainText } from "../core/text.ts";
import type { AppContext } from "../context.ts";
import type { ApiKeyRecord } from "../store/store.ts";
import { UsageError, type ParsedArgs } from "./args.ts";
import { iso, table, type Output } from "./output.ts";
import { targetProject } from "./projects.ts";

const status = (key: ApiKeyRecord, now: number) =>
  key.revokedAt !== undefined ? "revoked" : key.expiresAt !== undefined && key.expiresAt <= now ? "expired" : "active";

const json = (key: ApiKeyRecord, now: number) => ({
  id: key.id,
  name: key.name,
  status: status(key, now),
  createdAt: iso(key.createdAt),
  expiresAt: key.expiresAt === undefined ? null : iso(key.expiresAt),
  revokedAt: key.revokedAt === undefined ? null : iso(key.revokedAt),
});

/**
 * The key `apikeys create` asks for. Every problem with it is a usage error (exit 2), found before
 * the data directory is opened: a refused create changes and creates nothing.
 */
export function apiKeyCreateInput(args: ParsedArgs): { name: string; expiresIn: number | undefined } {
  const name = args.values["--name"]?.trim();
  if (name === undefined || !isPlainText(name, 1, 200)) throw new UsageError("--name must be 1 to 200 characters without control characters");
  const rawExpiry = args.values["--expires-in"];
  if (rawExpiry !== undefined && !/^[1-9]\d{0,9}$/.test(rawExpiry)) throw new UsageError("--expires-in must be a positive number of seconds");
  return { name, expiresIn: rawExpiry === undefined ? undefined : Number(rawExpiry) };
}

export async function apikeysCommand(ctx: AppContext, args: ParsedArgs, io: Output): Promise<void> {
  const [, action, target] = args.words;
  const asJson = args.switches.has("--json");
  const now = ctx.clock.now();
  const projectId = await targetProject(ctx, args);
  switch (action) {
    case "create": {
      const { name, expiresIn } = apiKeyCreateInput(args);
      const { record, secret } = await createApiKey(ctx.store, projectId, name, now, expiresIn);
      if (asJson) io.out(JSON.stringify({ ...json(record, now), key: secret }));
      else {
        io.err(`Created API key ${record.id} (${name}). It is shown only once:`);
        io.out(secret);
      }
      return;
    }
    case "list": {
      const keys = await ctx.store.listApiKeys(projectId);
      if (asJson) io.out(JSON.stringify({ items: keys.map((k) => json(k, now)) }));
      else io.out(table(["ID", "NAME", "STATUS", "CREATED", "EXPIRES"], keys.map((k) => [k.id, k.name, status(k, now), iso(k.createdAt), iso(k.expiresAt)])));
      return;
    }
    case "revoke": {
      if (target === undefined || !isUuid(target)) throw new UsageError("usage: tokenmint apikeys revoke ID (the id from 'apikeys list')");
      // Ids are case-insensitive, as in API paths.
      const record = await revokeApiKey(ctx.store, projectId, target.toLowerCase(), now);
      if (asJson) io.out(JSON.stringify(json(record, now)));
      else io.out(`Revoked API key ${record.id} (${record.name}).`);
      return;
    }
    default:
      throw new UsageError(`unknown apikeys command '${action ?? ""}': use create, list or revoke`);
  }
}
