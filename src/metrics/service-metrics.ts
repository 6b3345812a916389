/**
 * @module metrics/service-metrics
 * The metrics tokenmint exports, declared in one place. Labels carry only system facts (HTTP
 * method, route pattern, status, algorithm): never a project, provider or client id, a name or an
 * audience, so the metrics keep no data about clients' use (CONTRACT §5).
 */
import type { SigningAlg } from "../config/schema.ts";
import type { KeySetStatus } from "../keys/key-service.ts";
import type { Combine, MetricType } from "./merge.ts";
import { MetricsRegistry, type Counter, type Histogram } from "./registry.ts";

/** Upper bounds (seconds) of the request duration histogram. */
export const HTTP_DURATION_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** HTTP methods kept as they are in labels; anything else is counted as `other`. */
const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** A request method as a label value with bounded cardinality. */
export const methodLabel = (method: string) => (KNOWN_METHODS.has(method) ? method : "other");

/** What the scrape-time gauges read. */
export interface ServiceMetricsSources {
  /** Key status of the default project (KeyService#status bound to it). */
  keyStatus(): KeySetStatus | undefined;
  /** Epoch milliseconds (the context clock). */
  now(): number;
  /** `process.memoryUsage()` or a stand-in. */
  memoryUsage(): { rss: number; heapUsed: number };
  /** Process start, epoch seconds. */
  startTimeSeconds: number;
}

/** The registry of one process and the handles the code records into. */
export interface ServiceMetrics {
  readonly registry: MetricsRegistry;
  /** `tokenmint_http_requests_total{method,route,status}` */
  readonly httpRequests: Counter<"method" | "route" | "status">;
  /** `tokenmint_http_request_duration_seconds{method,route}` */
  readonly httpDuration: Histogram<"method" | "route">;
  /** `tokenmint_tokens_issued_total{alg}` */
  readonly tokensIssued: Counter<"alg">;
  /** Records one issued token. */
  tokenIssued(alg: SigningAlg): void;
  /** The exposition text of every metric, gauges computed now. */
  render(): string;
}

/** How each gauge combines across the processes of an instance; unlisted gauges take one process's view. */
const INSTANCE_GAUGES: Readonly<Record<string, Combine>> = {
  tokenmint_process_resident_memory_bytes: "sum",
  tokenmint_process_heap_used_bytes: "sum",
  tokenmint_process_start_time_seconds: "min",
};

/**
 * The merge rule of an instance's metrics (metrics/merge.ts): counts and histograms add up,
 * memory adds up, the start time is the earliest, and the key gauges (the same data seen by every
 * worker) are taken from the first process that reports them.
 */
export const instanceMergeRule = (family: string, type: MetricType): Combine => (type === "gauge" ? (INSTANCE_GAUGES[family] ?? "first") : "sum");

/** The sources of a real process: its memory and its start time. */
export function processSources(): Pick<ServiceMetricsSources, "memoryUsage" | "startTimeSeconds"> {
  return {
    memoryUsage: () => process.memoryUsage(),
    startTimeSeconds: Math.round(performance.timeOrigin) / 1000,
  };
}

export function createServiceMetrics(sources: ServiceMetricsSources): ServiceMetrics {
  const registry = new MetricsRegistry();
  const httpRequests = registry.counter(
    "tokenmint_http_requests_total",
    "HTTP requests answered, by method, route pattern ((unmatched) for unknown routes) and status.",
    ["method", "route", "status"],
  );
  const httpDuration = registry.histogram(
    "tokenmint_http_request_duration_seconds",
    "Time from receiving a request to finishing its answer, by method and route pattern.",
    ["method", "route"],
    HTTP_DURATION_BUCKETS,
  );
  const tokensIssued = registry.counter("tokenmint_tokens_issued_total", "Access tokens signed, by signing algorithm.", ["alg"]);
  registry.gauge("tokenmint_key_rotation_seconds", "Seconds until the next scheduled signing-key rotation of the default project (negative: overdue; no sample: automatic rotation off).", [], () => {
    const at = sources.keyStatus()?.nextRotationAt;
    return at === undefined ? [] : [{ labels: {}, value: (at - sources.now()) / 1000 }];
  });
  registry.gauge("tokenmint_jwks_keys", "Keys in the JWKS served for the default project.", [], () => {
    const status = sources.keyStatus();
    return status === undefined ? [] : [{ labels: {}, value: status.jwksKeys }];
  });
  registry.gauge("tokenmint_process_resident_memory_bytes", "Resident set size of the process in bytes (with several workers: of all processes of the instance together).", [], () => [
    { labels: {}, value: sources.memoryUsage().rss },
  ]);
  registry.gauge("tokenmint_process_heap_used_bytes", "JavaScript heap in use in bytes (with several workers: of all processes together).", [], () => [{ labels: {}, value: sources.memoryUsage().heapUsed }]);
  registry.gauge("tokenmint_process_start_time_seconds", "Start time of the process (with several workers: of the primary) since the Unix epoch in seconds.", [], () => [
    { labels: {}, value: sources.startTimeSeconds },
  ]);
  return {
    registry,
    httpRequests,
    httpDuration,
    tokensIssued,
    tokenIssued: (alg) => tokensIssued.inc({ alg }),
    render: () => registry.render(),
  };
}
