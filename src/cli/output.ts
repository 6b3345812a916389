/** @module cli/output — plain tables for people, JSON for scripts. */
import { writeSync } from "node:fs";
import { sleepSync } from "../runtime/sleep-sync.ts";

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

/** How long to wait for a full pipe's reader before writing again. */
const PIPE_WAIT_MS = 2;

/**
 * Writes all of `text` to `fd` before it returns. A pipe whose reader is slower than the output
 * (`tokenmint apikeys list --json | jq`) gets every byte: written through `process.stdout`, what
 * the pipe had no room for yet was lost at exit. A reader that has gone (EPIPE) ends the output.
 */
export function writeAll(fd: number, text: string): void {
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += writeSync(fd, bytes, offset);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === "EPIPE") return;
      if (code !== "EAGAIN") throw error;
      // A non-blocking pipe that is full: its reader takes the rest in a moment.
      sleepSync(PIPE_WAIT_MS);
    }
  }
}
