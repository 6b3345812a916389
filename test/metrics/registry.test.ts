/** The Prometheus registry renders exactly the text exposition format 0.0.4. */
import { describe, expect, test } from "bun:test";
import { EXPOSITION_CONTENT_TYPE, MetricsRegistry, escapeLabelValue, formatValue } from "../../src/metrics/registry.ts";

describe("metrics registry", () => {
  test("a counter, a gauge and a histogram render exactly", () => {
    const registry = new MetricsRegistry();
    const requests = registry.counter("app_requests_total", "Requests served.", ["method", "status"]);
    const temperature = registry.gauge("app_temperature_celsius", "Current temperature.");
    const latency = registry.histogram("app_latency_seconds", "Request latency.", ["route"], [0.1, 0.5, 1]);
    registry.gauge("app_computed", "Computed at scrape time.", ["kind"], () => [
      { labels: { kind: "a" }, value: 1.5 },
      { labels: { kind: "b" }, value: Number.NaN },
    ]);
    registry.counter("app_unused_total", "Never incremented.");

    requests.inc({ method: "GET", status: "200" });
    requests.inc({ method: "GET", status: "200" });
    requests.inc({ method: "POST", status: "201" }, 3);
    temperature.set({}, -4.25);
    for (const value of [0.05, 0.1, 0.3, 0.7, 2]) latency.observe({ route: "/a" }, value);
    latency.observe({ route: "/b" }, 0.5);

    expect(registry.render()).toBe(
      [
        "# HELP app_requests_total Requests served.",
        "# TYPE app_requests_total counter",
        'app_requests_total{method="GET",status="200"} 2',
        'app_requests_total{method="POST",status="201"} 3',
        "# HELP app_temperature_celsius Current temperature.",
        "# TYPE app_temperature_celsius gauge",
        "app_temperature_celsius -4.25",
        "# HELP app_latency_seconds Request latency.",
        "# TYPE app_latency_seconds histogram",
        'app_latency_seconds_bucket{route="/a",le="0.1"} 2',
        'app_latency_seconds_bucket{route="/a",le="0.5"} 3',
        'app_latency_seconds_bucket{route="/a",le="1"} 4',
        'app_latency_seconds_bucket{route="/a",le="+Inf"} 5',
        'app_latency_seconds_sum{route="/a"} 3.15',
        'app_latency_seconds_count{route="/a"} 5',
        'app_latency_seconds_bucket{route="/b",le="0.1"} 0',
        'app_latency_seconds_bucket{route="/b",le="0.5"} 1',
        'app_latency_seconds_bucket{route="/b",le="1"} 1',
        'app_latency_seconds_bucket{route="/b",le="+Inf"} 1',
        'app_latency_seconds_sum{route="/b"} 0.5',
        'app_latency_seconds_count{route="/b"} 1',
        "# HELP app_computed Computed at scrape time.",
        "# TYPE app_computed gauge",
        'app_computed{kind="a"} 1.5',
        'app_computed{kind="b"} NaN',
        "# HELP app_unused_total Never incremented.",
        "# TYPE app_unused_total counter",
        "",
      ].join("\n"),
    );
  });

  test("label values that run together the same way still make separate series", () => {
    const registry = new MetricsRegistry();
    const counter = registry.counter("pairs_total", "Pairs.", ["a", "b"]);
    counter.inc({ a: "1:x", b: "" });
    counter.inc({ a: "", b: "1:x" });
    counter.inc({ a: "x1:", b: "" }, 2);
    counter.inc({ a: "x", b: "1:" }, 3);
    expect(counter.value({ a: "1:x", b: "" })).toBe(1);
    expect(counter.value({ a: "", b: "1:x" })).toBe(1);
    expect(counter.value({ a: "x1:", b: "" })).toBe(2);
    expect(counter.value({ a: "x", b: "1:" })).toBe(3);
    expect(counter.total()).toBe(7);
    expect(registry.counter("empty_total", "Never counted.", ["a"]).total()).toBe(0);
    expect(registry.render().split("\n").filter((line) => line.startsWith("pairs_total{"))).toHaveLength(4);
    expect(() => counter.inc({ a: "x" } as never)).toThrow("metric label 'b' is missing");
  });

  test("label values escape backslash, double quote and newline; HELP escapes backslash and newline", () => {
    const registry = new MetricsRegistry();
    const counter = registry.counter("odd_total", 'Help with \\ backslash,\nnewline and "quotes".', ["value"]);
    counter.inc({ value: 'a"b' });
    counter.inc({ value: "c\\d" });
    counter.inc({ value: "e\nf" });
    counter.inc({ value: '\\"\n' });
    expect(registry.render()).toBe(
      [
        '# HELP odd_total Help with \\\\ backslash,\\nnewline and "quotes".',
        "# TYPE odd_total counter",
        'odd_total{value="a\\"b"} 1',
        'odd_total{value="c\\\\d"} 1',
        'odd_total{value="e\\nf"} 1',
        'odd_total{value="\\\\\\"\\n"} 1',
        "",
      ].join("\n"),
    );
    expect(escapeLabelValue('x\\y"z\n')).toBe('x\\\\y\\"z\\n');
  });

  test("values: infinities and NaN in Prometheus spelling", () => {
    expect([Infinity, -Infinity, Number.NaN, 0, 42, 0.0005, 1e21].map(formatValue)).toEqual(["+Inf", "-Inf", "NaN", "0", "42", "0.0005", "1e+21"]);
  });

  test("a gauge whose collector returns nothing renders only HELP and TYPE", () => {
    const registry = new MetricsRegistry();
    registry.gauge("maybe_seconds", "Absent when off.", [], () => []);
    expect(registry.render()).toBe("# HELP maybe_seconds Absent when off.\n# TYPE maybe_seconds gauge\n");
  });

  test("declaration errors are refused: names, duplicates, reserved labels, bad buckets, negative increments", () => {
    const registry = new MetricsRegistry();
    expect(() => registry.counter("bad-name_total", "x")).toThrow(/invalid metric name/);
    expect(() => registry.counter("ok_total", "x", ["bad-label"])).toThrow(/invalid label name/);
    expect(() => registry.counter("ok2_total", "x", ["__reserved"])).toThrow(/invalid label name/);
    registry.counter("dup_total", "x");
    expect(() => registry.gauge("dup_total", "x")).toThrow(/already registered/);
    expect(() => registry.histogram("h_le", "x", ["le"], [1])).toThrow(/le/);
    expect(() => registry.histogram("h_order", "x", [], [1, 1])).toThrow(/increasing/);
    expect(() => registry.histogram("h_empty", "x", [], [])).toThrow(/increasing/);
    const counter = registry.counter("neg_total", "x");
    expect(() => counter.inc({}, -1)).toThrow(/cannot decrease/);
    const labelled = registry.counter("lab_total", "x", ["a"]);
    expect(() => labelled.inc({} as { a: string })).toThrow(/label 'a' is missing/);
  });

  test("the exposition content type is 0.0.4 text", () => {
    expect(EXPOSITION_CONTENT_TYPE).toBe("text/plain; version=0.0.4; charset=utf-8");
  });
});
