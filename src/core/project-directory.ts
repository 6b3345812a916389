/**
 * @module core/project-directory
 * The projects of the instance in memory, with their settings resolved and their host names
 * indexed: discovery, JWKS and OAuth requests find their project by the `Host` header without a
 * store read. The issuer of a host comes from the project's configuration, never from the header:
 * a host that names no project is the default project at the public URL, and `X-Forwarded-Host`
 * is never read. `refresh` re-reads the projects, `refreshOnly` those written since (the key
 * service calls them when the data changed, keys/key-service.ts follow, and on its timer), so a
 * project created or changed by another process is served from the next request on. A host is
 * matched to its project only once the project can be served (`serves`: its signing keys are
 * loaded); until then the host stays the default project's, as it was before the project existed.
 */
import { AppError } from "../errors.ts";
import type { ProjectRecord, Store } from "../store/store.ts";
import { boundedMemo } from "../runtime/memo.ts";
import { resolveProject, type InstanceSettings, type ResolvedProject } from "./projects.ts";

/** The project a host serves, and that host's URL (the issuer its discovery document names). */
export interface HostMatch {
  project: ResolvedProject;
  url: string;
}

/** Lowercased host without a trailing dot; the port is kept. */
const normalizeHost = (host: string) => host.trim().toLowerCase().replace(/\.(?=:\d+$|$)/, "");

/**
 * A Host header's spellings looked up in the index: normalized, and that without its port;
 * remembered per header (every discovery request asks).
 */
const hostKeysOf = boundedMemo((host: string) => {
  const normalized = normalizeHost(host);
  return { normalized, bare: normalized.replace(/:\d+$/, "") };
});

export class ProjectDirectory {
  readonly #store: Store;
  readonly #instance: InstanceSettings;
  readonly #defaultId: string;
  readonly #serves: (projectId: string) => boolean;
  #byId = new Map<string, ResolvedProject>();
  #byHost = new Map<string, HostMatch>();
  /** The default project's match, what a host of no project resolves to (set by every #index). */
  #defaultMatch: HostMatch | undefined;
  readonly #hosts = new WeakMap<ResolvedProject, { own: string; custom: string | undefined }>();

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
    for (const record of await this.#store.listProjects()) byId.set(record.id, this.#resolve(record));
    this.#index(byId);
  }

  /**
   * Re-reads only the projects `ids` (those written since they were last read; one that no longer
   * exists is dropped) and rebuilds the host index from memory. With 2,000 projects, a full
   * refresh took 8–18 ms, and every process made one at each project's write.
   */
  async refreshOnly(ids: readonly string[]): Promise<void> {
    const records = await Promise.all(ids.map((id) => this.#store.getProject(id)));
    // Applied to the directory as it is now, not as it was before the reads: a refresh that ran
    // meanwhile is kept.
    const byId = new Map(this.#byId);
    ids.forEach((id, i) => {
      const record = records[i];
      if (record === undefined) byId.delete(id);
      else byId.set(id, this.#resolve(record));
    });
    this.#index(byId);
  }

  /** The record resolved; the object in the directory when it resolves to the same settings, so its host matches are kept. */
  #resolve(record: ProjectRecord): ResolvedProject {
    const resolved = resolveProject(record, this.#instance, this.#defaultId);
    const known = this.#byId.get(record.id);
    if (known === undefined) return resolved;
    for (const key of Object.keys(resolved) as (keyof ResolvedProject)[]) if (resolved[key] !== known[key]) return resolved;
    return known;
  }

  /** Makes `byId` the directory, with its host index. */
  #index(byId: Map<string, ResolvedProject>): void {
    if (!byId.has(this.#defaultId)) throw new Error("the default project is missing from the store");
    const byHost = new Map<string, HostMatch>();
    // A host's match is kept while its project and URL are: callers cache per match (WeakMap), so
    // what they keep for a host goes when the host does, and stays while nothing changed.
    const matchOf = (host: string, project: ResolvedProject, url: string): HostMatch => {
      const before = this.#byHost.get(host);
      return before?.project === project && before.url === url ? before : { project, url };
    };
    for (const project of byId.values()) {
      const custom = this.#hostsOf(project).custom;
      if (custom !== undefined && project.customUrl !== undefined) byHost.set(custom, matchOf(custom, project, project.customUrl));
    }
    // The instance's own hosts last: a custom domain never takes one over (normalizeCustomDomain refuses them).
    // The default project's last of all: a project whose slug names the public URL's host never
    // takes it over (newProjectRecord refuses one, and start-up data holding one, checkProjectHosts).
    const defaultProject = byId.get(this.#defaultId) as ResolvedProject;
    for (const project of [...byId.values(), defaultProject]) {
      const own = this.#hostsOf(project).own;
      byHost.set(own, matchOf(own, project, project.url));
    }
    this.#byId = byId;
    this.#byHost = byHost;
    this.#defaultMatch = byHost.get(this.#hostsOf(defaultProject).own) as HostMatch;
  }

  /** The hosts of a project's URLs, parsed once per resolved project. */
  #hostsOf(project: ResolvedProject): { own: string; custom: string | undefined } {
    let hosts = this.#hosts.get(project);
    if (hosts === undefined) {
      hosts = { own: new URL(project.url).host, custom: project.customUrl === undefined ? undefined : new URL(project.customUrl).host };
      this.#hosts.set(project, hosts);
    }
    return hosts;
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
   * matches, or when the matching project cannot be served yet. The same object for a host until
   * its project or URL changes, so callers may keep what they derive from it in a WeakMap.
   */
  resolveHost(host: string | null): HostMatch {
    if (host !== null) {
      const { normalized, bare } = hostKeysOf(host);
      const match = this.#byHost.get(normalized) ?? this.#byHost.get(bare);
      if (match !== undefined && this.#serves(match.project.id)) return match;
    }
    return this.#defaultMatch as HostMatch;
  }
}
