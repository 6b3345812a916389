/**
 * @module core/project-directory
 * The projects of the instance in memory, with their settings resolved and their host names
 * indexed: discovery, JWKS and OAuth requests find their project by the `Host` header without a
 * store read. The issuer of a host comes from the project's configuration, never from the header:
 * a host that names no project is the default project at the public URL, and `X-Forwarded-Host`
 * is never read. `refresh` re-reads the projects (the key service calls it when the data changed,
 * keys/key-service.ts follow, and on its timer), so a project created or changed by another
 * process is served from the next request on. A host is matched to
 * its project only once the project can be served (`serves`: its signing keys are loaded); until
 * then the host stays the default project's, as it was before the project existed.
 */
import { AppError } from "../errors.ts";
import type { Store } from "../store/store.ts";
import { resolveProject, type InstanceSettings, type ResolvedProject } from "./projects.ts";

/** The project a host serves, and that host's URL (the issuer its discovery document names). */
export interface HostMatch {
  project: ResolvedProject;
  url: string;
}

/** Lowercased host without a trailing dot; the port is kept. */
const normalizeHost = (host: string) => host.trim().toLowerCase().replace(/\.(?=:\d+$|$)/, "");

export class ProjectDirectory {
  readonly #store: Store;
  readonly #instance: InstanceSettings;
  readonly #defaultId: string;
  readonly #serves: (projectId: string) => boolean;
  #byId = new Map<string, ResolvedProject>();
  #byHost = new Map<string, HostMatch>();

  /** `serves` tells whether a project's hosts may be matched yet (startup.ts: its key ring is loaded). */
  constructor(store: Store, instance: InstanceSettings, defaultProjectId: string, serves: (projectId: string) => boolean) {
    this.#store = store;
    this.#instance = instance;
    this.#defaultId = defaultProjectId;
    this.#serves = serves;
  }

  /** Re-reads every project from the store and rebuilds the host index. */
  async refresh(): Promise<void> {
    const byId = new Map<string, ResolvedProject>();
    const byHost = new Map<string, HostMatch>();
    for (const record of await this.#store.listProjects()) {
      const project = resolveProject(record, this.#instance, this.#defaultId);
      byId.set(project.id, project);
      if (project.customUrl !== undefined) byHost.set(new URL(project.customUrl).host, { project, url: project.customUrl });
    }
    // The instance's own hosts last: a custom domain never takes one over (normalizeCustomDomain refuses them).
    for (const project of byId.values()) byHost.set(new URL(project.url).host, { project, url: project.url });
    if (!byId.has(this.#defaultId)) throw new Error("the default project is missing from the store");
    this.#byId = byId;
    this.#byHost = byHost;
  }

  /** Ids of every project, the default one included. */
  get ids(): string[] {
    return [...this.#byId.keys()];
  }

  get defaultProject(): ResolvedProject {
    return this.#byId.get(this.#defaultId) as ResolvedProject;
  }

  /** The project with `id`; `not_found` if it does not exist (or was created after the last refresh). */
  get(id: string): ResolvedProject {
    const project = this.#byId.get(id);
    if (project === undefined) throw new AppError("not_found", "The project does not exist.");
    return project;
  }

  /**
   * The project served at `host` (the request's Host header); the default project when none
   * matches, or when the matching project cannot be served yet.
   */
  resolveHost(host: string | null): HostMatch {
    if (host !== null) {
      const normalized = normalizeHost(host);
      const match = this.#byHost.get(normalized) ?? this.#byHost.get(normalized.replace(/:\d+$/, ""));
      if (match !== undefined && this.#serves(match.project.id)) return match;
    }
    const project = this.defaultProject;
    return { project, url: project.url };
  }
}
