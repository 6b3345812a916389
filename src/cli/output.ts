/** @module cli/output — plain tables for people, JSON for scripts. */

/** Formats rows as aligned columns under a header. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] as number)).join("  ").trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

export const iso = (ms: number | undefined) => (ms === undefined ? "-" : new Date(ms).toISOString());

/** Where a command writes: stdout for results, stderr for notes. */
export interface Output {
  out(text: string): void;
  err(text: string): void;
}
