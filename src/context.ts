/**
 * @module context
 * AppContext: the only shared state of a process. main.ts (or a test helper) builds it and hands
 * it to buildApp and the CLI; nothing reads globals or the environment after that.
 */
import type { Config } from "./config/schema.ts";
import type { ProjectDirectory } from "./core/project-directory.ts";
import type { InstanceSettings } from "./core/projects.ts";
import type { KeyService } from "./keys/key-service.ts";
import type { SignerFactory } from "./keys/signers/factory.ts";
import type { Logger } from "./logging/logger.ts";
import type { ServiceMetrics } from "./metrics/service-metrics.ts";
import type { Store } from "./store/store.ts";

/** The source of time; tests pin it. Epoch milliseconds. */
export interface Clock {
  now(): number;
  /** Milliseconds on a clock that only runs forward, to tell a jump of `now` from time passing (keys/key-service.ts). */
  elapsed?(): number;
}

export const systemClock: Clock = { now: () => Date.now(), elapsed: () => performance.now() };

export interface AppContext {
  config: Config;
  /**
   * What the instance contributes to every project: the server's own settings in `serve`; in a
   * CLI command, those the last server to start on the data recorded (core/projects.ts).
   */
  instance: InstanceSettings;
  logger: Logger;
  store: Store;
  keys: KeyService;
  /** Makes the signer of every key ring; a server hands RS256 over to libcrypto once it listens. */
  signers: SignerFactory;
  /** Every project of the instance, resolved and indexed by host name. */
  projects: ProjectDirectory;
  clock: Clock;
  /** The Prometheus metrics of this process (served only by `serve` with TOKENMINT_METRICS_PORT). */
  metrics: ServiceMetrics;
  /** The default project: the one at the public URL, which the CLI manages unless told otherwise. */
  projectId: string;
  /** Set while the process drains on SIGTERM: new requests get 503. */
  draining: boolean;
}
