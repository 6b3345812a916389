/**
 * @module metrics/registry
 * A small Prometheus registry: counters, gauges and histograms with fixed label names, rendered
 * in the text exposition format 0.0.4. One registry per AppContext; nothing here is global.
 *
 * Every family renders its `# HELP` and `# TYPE` lines even before it has a sample. Label values
 * are escaped (`\` `"` newline) and label names are fixed when the metric is declared, so callers
 * cannot add a label by accident.
 */

/** The media type of the text exposition format. */
export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Label values keyed by the label names a metric declared. */
export type Labels<L extends string> = Readonly<Record<L, string>>;

/** One sample of a gauge computed at scrape time. */
export interface GaugeSample<L extends string> {
  labels: Labels<L>;
  value: number;
}

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "gauge" | "histogram";
  /** The sample lines of this family, each ending in a newline. */
  samples(): string;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A label value as the exposition format needs it: backslash, double quote and newline escaped. */
export const escapeLabelValue = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

/** A HELP text: backslash and newline escaped. */
export const escapeHelp = (text: string) => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");

/** A sample value: `+Inf`, `-Inf`, `NaN` or the shortest decimal form. */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

function labelText(pairs: readonly (readonly [string, string])[]): string {
  return pairs.length === 0 ? "" : `{${pairs.map(([name, value]) => `${name}="${escapeLabelValue(value)}"`).join(",")}}`;
}

/** Label values in declaration order; throws when one is missing (a programming error). */
function labelPairs<L extends string>(names: readonly L[], labels: Labels<L>): [L, string][] {
  return names.map((name) => {
    const value = labels[name];
    if (typeof value !== "string") throw new Error(`metric label '${name}' is missing`);
    return [name, value];
  });
}

/** One series: its label pairs and its value. */
interface Entry<L extends string, V> {
  pairs: [L, string][];
  value: V;
}

/** A level of the lookup tree: one map per label, keyed by that label's value; the last level holds the entries. */
type Level<L extends string, V> = Map<string, Level<L, V> | Entry<L, V>>;

/** Series of one family, keyed by their label values, in first-seen order. */
class Series<L extends string, V> {
  readonly #names: readonly L[];
  /** Label values looked up one label at a time: no key is built per lookup. */
  readonly #tree: Level<L, V> = new Map();
  readonly #entries: Entry<L, V>[] = [];
  /** The one series of a family without labels. */
  #only: Entry<L, V> | undefined;

  constructor(names: readonly L[]) {
    this.#names = names;
  }

  /** The series for `labels`, created by `init` the first time. Allocates nothing once the series exists (every request counts). */
  get(labels: Labels<L>, init: () => V): V {
    const names = this.#names;
    if (names.length === 0) return (this.#only ??= this.#add(labels, init)).value;
    let level = this.#tree;
    for (let i = 0; ; i++) {
      const value = labels[names[i] as L];
      if (typeof value !== "string") throw new Error(`metric label '${names[i]}' is missing`);
      const next = level.get(value);
      if (i === names.length - 1) {
        if (next !== undefined) return (next as Entry<L, V>).value;
        const entry = this.#add(labels, init);
        level.set(value, entry);
        return entry.value;
      }
      let child = next as Level<L, V> | undefined;
      if (child === undefined) {
        child = new Map();
        level.set(value, child);
      }
      level = child;
    }
  }

  #add(labels: Labels<L>, init: () => V): Entry<L, V> {
    const entry = { pairs: labelPairs(this.#names, labels), value: init() };
    this.#entries.push(entry);
    return entry;
  }

  entries(): Entry<L, V>[] {
    return [...this.#entries];
  }
}

/** A new series' value of a counter or gauge (one function: nothing is allocated per count). */
const zero = () => ({ value: 0 });

/** A monotonically increasing count. */
export class Counter<L extends string = never> implements Family {
  readonly type = "counter";
  readonly #series: Series<L, { value: number }>;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[],
  ) {
    this.#series = new Series(labelNames);
  }

  /** Adds `by` (default 1, never negative) to the series of `labels`. */
  inc(labels: Labels<L>, by = 1): void {
    if (!(by >= 0)) throw new Error(`counter ${this.name} cannot decrease`);
    this.#series.get(labels, zero).value += by;
  }

  /** The sum over every series. */
  total(): number {
    let sum = 0;
    for (const entry of this.#series.entries()) sum += entry.value.value;
    return sum;
  }

  /** The current value of one series (0 when it has no sample yet). */
  value(labels: Labels<L>): number {
    return this.#series.entries().find((e) => e.pairs.every(([name, value]) => labels[name] === value))?.value.value ?? 0;
  }

  samples(): string {
    return this.#series
      .entries()
      .map(({ pairs, value }) => `${this.name}${labelText(pairs)} ${formatValue(value.value)}\n`)
      .join("");
  }
}

/**
 * A value that goes up and down. Either set by the code (`set`) or computed at scrape time by
 * `collect`, which returns the samples to show (none for "no value").
 */
export class Gauge<L extends string = never> implements Family {
  readonly type = "gauge";
  readonly #labelNames: readonly L[];
  readonly #series: Series<L, { value: number }>;
  readonly #collect: (() => readonly GaugeSample<L>[]) | undefined;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[],
    collect?: () => readonly GaugeSample<L>[],
  ) {
    this.#labelNames = labelNames;
    this.#series = new Series(labelNames);
    this.#collect = collect;
  }

  set(labels: Labels<L>, value: number): void {
    this.#series.get(labels, zero).value = value;
  }

  samples(): string {
    const set = this.#series.entries().map(({ pairs, value }) => ({ pairs, value: value.value }));
    const collected = (this.#collect?.() ?? []).map((s) => ({ pairs: labelPairs(this.#labelNames, s.labels), value: s.value }));
    return [...set, ...collected].map(({ pairs, value }) => `${this.name}${labelText(pairs)} ${formatValue(value)}\n`).join("");
  }
}

interface HistogramSeries {
  /** Count per bucket (not cumulative), same order as the bounds. */
  counts: number[];
  sum: number;
  count: number;
}

/** Observations counted into cumulative buckets, with their sum and count. */
export class Histogram<L extends string = never> implements Family {
  readonly type = "histogram";
  readonly buckets: readonly number[];
  readonly #series: Series<L, HistogramSeries>;
  /** A new series' value. */
  readonly #empty: () => HistogramSeries;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[],
    buckets: readonly number[],
  ) {
    if ((labelNames as readonly string[]).includes("le")) throw new Error(`histogram ${name} must not declare the label 'le'`);
    if (buckets.length === 0 || buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= (buckets[i - 1] as number)))) {
      throw new Error(`histogram ${name} needs finite, strictly increasing buckets`);
    }
    this.buckets = [...buckets];
    this.#series = new Series(labelNames);
    this.#empty = () => ({ counts: this.buckets.map(() => 0), sum: 0, count: 0 });
  }

  observe(labels: Labels<L>, value: number): void {
    const series = this.#series.get(labels, this.#empty);
    const buckets = this.buckets;
    for (let i = 0; i < buckets.length; i++) {
      if (value <= (buckets[i] as number)) {
        series.counts[i] = (series.counts[i] as number) + 1;
        break;
      }
    }
    series.sum += value;
    series.count += 1;
  }

  samples(): string {
    let text = "";
    for (const { pairs, value } of this.#series.entries()) {
      let cumulative = 0;
      this.buckets.forEach((bound, i) => {
        cumulative += value.counts[i] as number;
        text += `${this.name}_bucket${labelText([...pairs, ["le", formatValue(bound)]])} ${cumulative}\n`;
      });
      text += `${this.name}_bucket${labelText([...pairs, ["le", "+Inf"]])} ${value.count}\n`;
      text += `${this.name}_sum${labelText(pairs)} ${formatValue(value.sum)}\n`;
      text += `${this.name}_count${labelText(pairs)} ${value.count}\n`;
    }
    return text;
  }
}

/** The metric families of one process, rendered in declaration order. */
export class MetricsRegistry {
  readonly #families = new Map<string, Family>();

  #add<F extends Family>(family: F, labelNames: readonly string[]): F {
    if (!METRIC_NAME.test(family.name)) throw new Error(`invalid metric name '${family.name}'`);
    for (const label of labelNames) {
      if (!LABEL_NAME.test(label) || label.startsWith("__")) throw new Error(`invalid label name '${label}' on ${family.name}`);
    }
    if (this.#families.has(family.name)) throw new Error(`metric ${family.name} is already registered`);
    this.#families.set(family.name, family);
    return family;
  }

  counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return this.#add(new Counter(name, help, labelNames), labelNames);
  }

  gauge<L extends string = never>(name: string, help: string, labelNames: readonly L[] = [], collect?: () => readonly GaugeSample<L>[]): Gauge<L> {
    return this.#add(new Gauge(name, help, labelNames, collect), labelNames);
  }

  histogram<L extends string = never>(name: string, help: string, labelNames: readonly L[], buckets: readonly number[]): Histogram<L> {
    return this.#add(new Histogram(name, help, labelNames, buckets), labelNames);
  }

  /** The whole registry in the text exposition format 0.0.4. */
  render(): string {
    let text = "";
    for (const family of this.#families.values()) {
      text += `# HELP ${family.name} ${escapeHelp(family.help)}\n# TYPE ${family.name} ${family.type}\n${family.samples()}`;
    }
    return text;
  }
}
