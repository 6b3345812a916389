/**
 * @module metrics/merge
 * One exposition for a whole instance out of the expositions of its processes (the primary's
 * and each worker's, all rendered by MetricsRegistry#render, so the format is known exactly).
 * Series are matched by name and labels; counters and histograms add up; a gauge family combines
 * as its rule says (a sum of memory, the earliest start time, one process's view of the keys).
 * Families keep the order of the first exposition that declares them.
 */
import { formatValue } from "./registry.ts";

export type MetricType = "counter" | "gauge" | "histogram";

/** How the samples of one series combine across processes; `omit` leaves the family's samples out. */
export type Combine = "sum" | "min" | "first" | "omit";

export type MergeRule = (family: string, type: MetricType) => Combine;

interface MergedFamily {
  name: string;
  type: MetricType;
  /** The `# HELP` and `# TYPE` lines. */
  header: string;
  /** Series key (the sample line without its value) → combined value, in first-seen order. */
  samples: Map<string, number>;
}

function parseValue(text: string): number {
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  return Number(text);
}

function combine(how: Combine, seen: number | undefined, value: number): number {
  if (seen === undefined) return value;
  if (how === "sum") return seen + value;
  if (how === "min") return Math.min(seen, value);
  return seen;
}

/** Merges expositions into one; samples of a family follow its `# TYPE` line, as render() writes them. */
export function mergeExpositions(texts: readonly string[], rule: MergeRule): string {
  const families = new Map<string, MergedFamily>();
  for (const text of texts) {
    let family: MergedFamily | undefined;
    let help: string | undefined;
    for (const line of text.split("\n")) {
      if (line === "") continue;
      if (line.startsWith("# HELP ")) {
        help = line;
        continue;
      }
      if (line.startsWith("# TYPE ")) {
        const [, , name = "", type = "gauge"] = line.split(" ");
        family = families.get(name);
        if (family === undefined) {
          family = { name, type: type as MetricType, header: `${help ?? `# HELP ${name} `}\n${line}\n`, samples: new Map() };
          families.set(name, family);
        }
        help = undefined;
        continue;
      }
      if (line.startsWith("#") || family === undefined) continue;
      const how = rule(family.name, family.type);
      if (how === "omit") continue;
      // Label values may hold spaces; the value never does: it follows the last one.
      const cut = line.lastIndexOf(" ");
      const key = line.slice(0, cut);
      family.samples.set(key, combine(how, family.samples.get(key), parseValue(line.slice(cut + 1))));
    }
  }
  let merged = "";
  for (const family of families.values()) {
    merged += family.header;
    for (const [key, value] of family.samples) merged += `${key} ${formatValue(value)}\n`;
  }
  return merged;
}
