/**
 * One exposition for an instance out of its processes' expositions: counts and histograms add up
 * series by series, gauges combine by their rule, families keep their order and headers, and
 * the result is exactly what one registry holding all the observations would render.
 */
import { describe, expect, test } from "bun:test";
import { mergeExpositions } from "../../src/metrics/merge.ts";
import { MetricsRegistry } from "../../src/metrics/registry.ts";
import { createServiceMetrics, instanceMergeRule } from "../../src/metrics/service-metrics.ts";

/** A registry of the same families as every process declares. */
function processRegistry(gauges: { memory: number; started: number; keys?: number }) {
  const registry = new MetricsRegistry();
  const requests = registry.counter("app_requests_total", "Requests served.", ["route", "status"]);
  const latency = registry.histogram("app_latency_seconds", "Request latency.", ["route"], [0.1, 1]);
  registry.gauge("tokenmint_process_resident_memory_bytes", "Memory.", [], () => [{ labels: {}, value: gauges.memory }]);
  registry.gauge("tokenmint_process_start_time_seconds", "Start.", [], () => [{ labels: {}, value: gauges.started }]);
  registry.gauge("tokenmint_jwks_keys", "Keys.", [], () => (gauges.keys === undefined ? [] : [{ labels: {}, value: gauges.keys }]));
  return { registry, requests, latency };
}

describe("merging expositions", () => {
  test("counters and histograms add up; memory adds up, the start is the earliest, key gauges come from the first reporter", () => {
    const primary = processRegistry({ memory: 10, started: 100 });
    const one = processRegistry({ memory: 20, started: 105, keys: 2 });
    const two = processRegistry({ memory: 30, started: 104, keys: 3 });
    one.requests.inc({ route: "/a b", status: "200" }, 2);
    two.requests.inc({ route: "/a b", status: "200" }, 3);
    two.requests.inc({ route: 'say "hi"', status: "404" });
    one.latency.observe({ route: "/a" }, 0.05);
    two.latency.observe({ route: "/a" }, 0.5);
    two.latency.observe({ route: "/b" }, 5);

    // What a single registry holding everything renders, apart from the gauges.
    const all = processRegistry({ memory: 60, started: 100, keys: 2 });
    all.requests.inc({ route: "/a b", status: "200" }, 5);
    all.requests.inc({ route: 'say "hi"', status: "404" });
    all.latency.observe({ route: "/a" }, 0.05);
    all.latency.observe({ route: "/a" }, 0.5);
    all.latency.observe({ route: "/b" }, 5);

    const merged = mergeExpositions([primary.registry.render(), one.registry.render(), two.registry.render()], instanceMergeRule);
    expect(merged).toBe(all.registry.render());
  });

  test("an omitted family keeps its header and drops its samples; an empty input changes nothing", () => {
    const a = processRegistry({ memory: 1, started: 1 });
    a.requests.inc({ route: "/", status: "200" });
    const text = a.registry.render();
    const countsOnly = mergeExpositions(["", text], (_, type) => (type === "gauge" ? "omit" : "sum"));
    expect(countsOnly).toContain('app_requests_total{route="/",status="200"} 1\n');
    expect(countsOnly).toContain("# TYPE tokenmint_process_resident_memory_bytes gauge\n");
    expect(countsOnly).not.toMatch(/^tokenmint_process_resident_memory_bytes /m);
    expect(mergeExpositions([text], instanceMergeRule)).toBe(text);
  });

  test("the service's own families merge: every family once, in declaration order", () => {
    const source = (rss: number) =>
      createServiceMetrics({ keyStatus: () => undefined, now: () => 0, memoryUsage: () => ({ rss, heapUsed: 1 }), startTimeSeconds: 5 });
    const a = source(100);
    const b = source(200);
    a.tokenIssued("ES256");
    b.tokenIssued("ES256");
    const merged = mergeExpositions([a.render(), b.render()], instanceMergeRule);
    expect(merged).toContain('tokenmint_tokens_issued_total{alg="ES256"} 2\n');
    expect(merged).toContain("tokenmint_process_resident_memory_bytes 300\n");
    expect(merged).toContain("tokenmint_process_heap_used_bytes 2\n");
    expect(merged).toContain("tokenmint_process_start_time_seconds 5\n");
    expect(merged.match(/^# TYPE .*$/gm)).toEqual(a.render().match(/^# TYPE .*$/gm));
  });
});
