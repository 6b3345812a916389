/**
 * @module core/projects
 * Projects own keys, API keys, providers and clients; one instance serves many. The default
 * project is created on first start and lives at the configured public URL. Every other project
 * has its own host, `<slug>.<base domain>`, and any project may add a custom domain. A project's
 * settings (signing algorithm, rotation period, default token lifetime) fall back to the
 * instance's configuration while unset.
 */
import { canonicalHost, isDnsName, isHostName, type Config, type SigningAlg } from "../config/schema.ts";
import { AppError } from "../errors.ts";
import { MAX_TOKEN_LIFETIME_S } from "../keys/lifecycle.ts";
import type { KeySetRecord, ProjectRecord, ProjectSettings, Store } from "../store/store.ts";
import { isUuid, uuidv7 } from "./ids.ts";
import { isEmptyPatch } from "./patch.ts";
import { isPlainText } from "./text.ts";
import { DEFAULT_TOKEN_LIFETIME_S } from "./tokens.ts";

/** The slug the default project answers to under the base domain. */
export const DEFAULT_PROJECT_SLUG = "default";

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

/** What the instance configuration contributes to every project. */
export type InstanceSettings = Pick<Config, "publicUrl" | "baseDomain" | "signingAlg" | "keyRotationPeriod">;

/** The meta entry with the instance settings of the server that last started on the data. */
const SERVED_SETTINGS_META = "servedInstanceSettings";

const instanceSettingsOf = ({ publicUrl, baseDomain, signingAlg, keyRotationPeriod }: InstanceSettings): InstanceSettings => ({
  publicUrl,
  baseDomain,
  signingAlg,
  keyRotationPeriod,
});

/**
 * Records a starting server's instance settings in the data (written only when they changed), so
 * that CLI commands, whose own settings may differ, resolve projects as the server does.
 */
export async function recordServedSettings(store: Store, instance: InstanceSettings): Promise<void> {
  const own = instanceSettingsOf(instance);
  const stored = await store.getMeta<InstanceSettings>(SERVED_SETTINGS_META);
  if (stored === undefined || JSON.stringify(instanceSettingsOf(stored)) !== JSON.stringify(own)) await store.setMeta(SERVED_SETTINGS_META, own);
}

/** The instance settings the last server to start on the data recorded; undefined if none has. */
export async function servedSettings(store: Store): Promise<InstanceSettings | undefined> {
  const stored = await store.getMeta<InstanceSettings>(SERVED_SETTINGS_META);
  return stored === undefined ? undefined : instanceSettingsOf(stored);
}

/**
 * Why projects other than the default one cannot have their hosts, `<slug>.<base domain>`, under
 * these settings: the base domain (by default the public URL's host) is an IP address. Undefined
 * when they can.
 */
export function projectHostsProblem(instance: InstanceSettings): string | undefined {
  if (isDnsName(instance.baseDomain)) return undefined;
  return `projects other than the default one live at <slug>.<base domain>, and the base domain ${instance.baseDomain} (TOKENMINT_PUBLIC_URL's host unless TOKENMINT_BASE_DOMAIN is set) is an IP address: set TOKENMINT_BASE_DOMAIN to a DNS name`;
}

/** A project with its settings resolved: what routes, tokens and the key service use. */
export interface ResolvedProject {
  id: string;
  name: string;
  slug: string;
  isDefault: boolean;
  signingAlg: SigningAlg;
  keyRotationPeriod: number;
  /** Whether the project sets `keyRotationPeriod` itself; if not, it is the instance's setting. */
  ownKeyRotationPeriod: boolean;
  defaultTokenLifetime: number;
  customDomain: string | undefined;
  /** The project's own URL: the public URL for the default project, else `<scheme>://<slug>.<base domain>`. */
  url: string;
  /** `<scheme>://<custom domain>` when a custom domain is set. */
  customUrl: string | undefined;
  /** The `iss` of tokens issued by the management API: the custom domain's URL if set, else `url`. */
  issuer: string;
  createdAt: number;
  updatedAt: number;
}

export function resolveProject(record: ProjectRecord, instance: InstanceSettings, defaultProjectId: string): ResolvedProject {
  const isDefault = record.id === defaultProjectId;
  const scheme = new URL(instance.publicUrl).protocol;
  const slug = record.slug ?? DEFAULT_PROJECT_SLUG;
  const url = isDefault ? instance.publicUrl : `${scheme}//${slug}.${instance.baseDomain}`;
  // Its origin: canonical even for a domain stored before custom domains were canonicalized.
  const customUrl = record.customDomain === undefined ? undefined : new URL(`${scheme}//${record.customDomain}`).origin;
  return {
    id: record.id,
    name: record.name,
    slug,
    isDefault,
    signingAlg: record.signingAlg ?? instance.signingAlg,
    keyRotationPeriod: record.keyRotationPeriod ?? instance.keyRotationPeriod,
    ownKeyRotationPeriod: record.keyRotationPeriod !== undefined,
    defaultTokenLifetime: record.defaultTokenLifetime ?? DEFAULT_TOKEN_LIFETIME_S,
    customDomain: record.customDomain,
    url,
    customUrl,
    issuer: customUrl ?? url,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt ?? record.createdAt,
  };
}

/** The issuer a token of `project` carries: its custom domain's, unless `forceDefaultDomain`. */
export const tokenIssuer = (project: ResolvedProject, forceDefaultDomain: boolean): string =>
  forceDefaultDomain ? project.url : project.issuer;

/** A slug problem, or undefined: a DNS label of 1-63 lowercase letters, digits and inner hyphens. */
export function slugProblem(slug: string): string | undefined {
  if (!/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(slug)) {
    return "slug must be a DNS label: 1 to 63 lowercase letters, digits and hyphens, not starting or ending with a hyphen";
  }
  if (slug === DEFAULT_PROJECT_SLUG) return `slug '${DEFAULT_PROJECT_SLUG}' is reserved for the default project`;
  // `--project` takes a slug or an id: a slug that reads as an id could name another project.
  if (isUuid(slug)) return `slug '${slug}' has the form of a project id; choose a name`;
  // The slug becomes a host name: an `xn--` label must be valid IDNA, or no URL of the project could be built.
  if (!isHostName(`${slug}.example`)) return `slug '${slug}' is not a valid internationalized (xn--) label`;
  return undefined;
}

/** A host without its port. */
const hostnameOf = (host: string) => host.replace(/:\d+$/, "");

/**
 * A custom domain in canonical form (canonicalHost: what a request's Host is matched against),
 * or the problem with it. Its host name, whatever the port, must not be the public
 * URL's or the base domain's, nor one under the base domain: no port can make a project answer at
 * another's host. It must be a domain name: no IP address, no single label.
 */
export function normalizeCustomDomain(raw: string, instance: InstanceSettings): string | { problem: string } {
  const host = canonicalHost(raw, new URL(instance.publicUrl).protocol);
  if (host === undefined) return { problem: "customDomain must be a host name with an optional port, like auth.example.com" };
  const name = hostnameOf(host);
  const base = hostnameOf(instance.baseDomain);
  if (name === new URL(instance.publicUrl).hostname || name === base || name.endsWith(`.${base}`)) {
    return { problem: `customDomain must not be the instance's own host or a host under the base domain ${instance.baseDomain}, on any port` };
  }
  // An address or a single label names the machine, not a domain: claimed, it would take the
  // requests every caller of the instance sends to that address or name from the default project.
  if (!name.includes(".") || /^\d+$/.test(name.slice(name.lastIndexOf(".") + 1))) {
    return { problem: "customDomain must be a domain name of at least two labels, like auth.example.com, not an IP address or a single name" };
  }
  return host;
}

/**
 * Why `projects` cannot all be served under `instance`, or undefined: a host two of them would
 * answer at, port aside. A custom domain and a slug are checked when set, against the settings of
 * the day; settings changed since (`TOKENMINT_PUBLIC_URL`, `TOKENMINT_BASE_DOMAIN`) can make a
 * custom domain the public URL's host or another project's own host, or give a project the
 * public URL's host.
 */
export function projectHostsClash(projects: readonly ProjectRecord[], instance: InstanceSettings, defaultProjectId: string): string | undefined {
  const publicName = new URL(instance.publicUrl).hostname;
  const base = hostnameOf(instance.baseDomain);
  /** Each project's own host name, and whose it is. */
  const own = new Map<string, string>([[publicName, DEFAULT_PROJECT_SLUG]]);
  for (const project of projects) {
    if (project.id === defaultProjectId) continue;
    const slug = project.slug ?? DEFAULT_PROJECT_SLUG;
    const name = `${slug}.${base}`;
    if (name === publicName) return `project '${slug}' would be at ${publicName}, the public URL's host`;
    own.set(name, slug);
  }
  for (const project of projects) {
    if (project.customDomain === undefined) continue;
    const slug = project.id === defaultProjectId ? DEFAULT_PROJECT_SLUG : (project.slug ?? DEFAULT_PROJECT_SLUG);
    const holder = own.get(hostnameOf(project.customDomain));
    if (holder !== undefined && holder !== slug) {
      return `project '${slug}' has the custom domain ${project.customDomain}, which is now ${holder === DEFAULT_PROJECT_SLUG ? "the public URL's host" : `the host of project '${holder}'`}`;
    }
  }
  return undefined;
}

/** A change of a project's settings, as `PATCH /v1/project` and `projects create` take it. */
export interface ProjectChange {
  name?: string;
  signingAlg?: SigningAlg;
  keyRotationPeriod?: number;
  defaultTokenLifetime?: number;
  /** A host name, or "" to remove the custom domain. */
  customDomain?: string;
}

/** Checks a change field by field; throws `invalid_request` naming the field. */
function applyChange(record: ProjectRecord, change: ProjectChange, instance: InstanceSettings): ProjectRecord {
  const next: ProjectRecord = { ...record };
  if (change.name !== undefined) {
    const name = change.name.trim();
    if (!isPlainText(name, 1, 200)) {
      throw new AppError("invalid_request", "name must be 1 to 200 characters without control characters.");
    }
    next.name = name;
  }
  if (change.signingAlg !== undefined) next.signingAlg = change.signingAlg;
  if (change.keyRotationPeriod !== undefined) {
    const period = change.keyRotationPeriod;
    if (!Number.isInteger(period) || period < 0 || period > 31_536_000 || (period > 0 && period < 60)) {
      throw new AppError("invalid_request", "keyRotationPeriod must be 0 (off) or a whole number of seconds from 60 to 31536000.");
    }
    next.keyRotationPeriod = period;
  }
  if (change.defaultTokenLifetime !== undefined) {
    const lifetime = change.defaultTokenLifetime;
    if (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_TOKEN_LIFETIME_S) {
      throw new AppError("invalid_request", `defaultTokenLifetime must be a whole number of seconds from 1 to ${MAX_TOKEN_LIFETIME_S}.`);
    }
    next.defaultTokenLifetime = lifetime;
  }
  if (change.customDomain === "") delete next.customDomain;
  else if (change.customDomain !== undefined) {
    const domain = normalizeCustomDomain(change.customDomain, instance);
    if (typeof domain !== "string") throw new AppError("invalid_request", `${domain.problem}.`);
    next.customDomain = domain;
  }
  return next;
}

const storeClash = (error: unknown): never => {
  const kind = (error as { kind?: string }).kind;
  if (kind === "conflict" || kind === "already_exists") throw new AppError("conflict", `${(error as Error).message}.`);
  throw error;
};

/** What `createProject` takes: a slug and a name, and optionally the other settings. */
export type NewProject = { slug: string; name: string } & ProjectChange;

/** The record of a new project, checked field by field without the store (`invalid_request` naming the field). */
export function newProjectRecord(input: NewProject, instance: InstanceSettings, now: number): ProjectRecord {
  const problem = slugProblem(input.slug);
  if (problem !== undefined) throw new AppError("invalid_request", `${problem}.`);
  // With a base domain above the public URL's host (auth.example.com under example.com), one slug
  // names the default project's host: that project would take its callers and its JWKS.
  const publicName = new URL(instance.publicUrl).hostname;
  if (`${input.slug}.${hostnameOf(instance.baseDomain)}` === publicName) {
    throw new AppError("invalid_request", `slug '${input.slug}' would give the project the default project's host ${publicName}.`);
  }
  return applyChange({ id: uuidv7(now), name: "", slug: input.slug, createdAt: now, updatedAt: now }, input, instance);
}

/**
 * Creates a project; `conflict` when the slug or custom domain is taken. With `firstKeys`, its
 * first key set (made for the project's algorithm and rotation period) is stored with it in one
 * write: a server that finds the project finds its keys, and need not make them while its
 * requests wait.
 */
export async function createProject(
  store: Store,
  input: NewProject,
  instance: InstanceSettings,
  now: number,
  firstKeys?: (projectId: string, policy: { signingAlg: SigningAlg; rotationPeriod: number }) => Promise<KeySetRecord>,
): Promise<ProjectRecord> {
  const hosts = projectHostsProblem(instance);
  if (hosts !== undefined) throw new AppError("invalid_request", `Cannot create a project: ${hosts}.`);
  const record = newProjectRecord(input, instance, now);
  // Its host must be no other project's custom domain (one set under other settings).
  const clash = (await store.listProjects()).find((p) => p.customDomain !== undefined && hostnameOf(p.customDomain) === `${record.slug}.${hostnameOf(instance.baseDomain)}`);
  if (clash !== undefined) throw new AppError("conflict", `Cannot create a project: its host ${record.slug}.${hostnameOf(instance.baseDomain)} is the custom domain of project '${clash.slug}'.`);
  const policy = { signingAlg: record.signingAlg ?? instance.signingAlg, rotationPeriod: record.keyRotationPeriod ?? instance.keyRotationPeriod };
  const keySet = await firstKeys?.(record.id, policy);
  await store.createProject(record, keySet).catch(storeClash);
  return record;
}

/** The answer to a change of a project deleted meanwhile. */
const projectGone = () => new AppError("not_found", "The project no longer exists.");

/** Applies `change` to the project (an empty one writes nothing); `conflict` when the custom domain belongs to another project. */
export async function updateProject(store: Store, projectId: string, change: ProjectChange, instance: InstanceSettings, now: number): Promise<ProjectRecord> {
  if (isEmptyPatch(change)) {
    const current = await store.getProject(projectId);
    if (current === undefined) throw projectGone();
    return current;
  }
  return store
    .updateProject(projectId, (current) => ({ ...applyChange(current, change, instance), updatedAt: now }))
    .catch((error: { kind?: string }) => {
      if (error.kind === "not_found") throw projectGone();
      return storeClash(error);
    });
}

/** The settings a record sets itself, without the instance defaults (for display). */
export const ownSettings = (record: ProjectRecord): ProjectSettings => ({
  signingAlg: record.signingAlg,
  keyRotationPeriod: record.keyRotationPeriod,
  defaultTokenLifetime: record.defaultTokenLifetime,
  customDomain: record.customDomain,
});
