/**
 * @module core/projects
 * Projects own keys, API keys, providers and clients. This release runs one default project,
 * created on first start; its issuer is the configured public URL.
 */
import type { Store } from "../store/store.ts";
import { uuidv7 } from "./ids.ts";

/** Returns the id of the default project, creating it on first start (safe against a racing process). */
export async function ensureDefaultProject(store: Store, now: number): Promise<string> {
  const id = await store.initMeta("defaultProjectId", uuidv7(now));
  if ((await store.getProject(id)) === undefined) {
    await store.createProject({ id, name: "default", createdAt: now }).catch((error: { kind?: string }) => {
      if (error.kind !== "already_exists") throw error;
    });
  }
  return id;
}
