/**
 * The machine a benchmark ran on, as far as it decides the figures: the CPU's maker, family and
 * model (a model name such as "AMD EPYC" names several kinds), whether it has AVX-512 and its
 * integer fused multiply-add (IFMA, which OpenSSL's RSA uses and the runtime's does not), its
 * clock, the cores and the memory. Read from /proc/cpuinfo where there is one.
 */
import { cpus, totalmem } from "node:os";
import { readFileSync } from "node:fs";

export interface Machine {
  cores: number;
  /** The model name, e.g. "AMD EPYC". */
  cpu: string;
  vendor?: string;
  family?: number;
  model?: number;
  /** The clock the kernel reports for the first core, in MHz. */
  mhz?: number;
  avx512?: boolean;
  /** AVX-512 IFMA (`avx512ifma`). */
  ifma?: boolean;
  memoryGiB: number;
}

/** The fields of the first processor in /proc/cpuinfo's text. */
function firstProcessor(cpuinfo: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of cpuinfo.split("\n")) {
    if (line.trim() === "") {
      if (fields.size > 0) break;
      continue;
    }
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    fields.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  return fields;
}

const numberOf = (text: string | undefined): number | undefined => {
  const n = text === undefined ? Number.NaN : Number(text);
  return Number.isFinite(n) ? n : undefined;
};

/** The machine described by /proc/cpuinfo's text (undefined where there is none) and the given cores and memory. */
export function describeMachine(cpuinfo: string | undefined, cores: number, cpu: string, memoryBytes: number): Machine {
  const machine: Machine = { cores, cpu, memoryGiB: Math.round(memoryBytes / 2 ** 30) };
  if (cpuinfo === undefined) return machine;
  const fields = firstProcessor(cpuinfo);
  const flags = fields.get("flags")?.split(/\s+/);
  return {
    ...machine,
    vendor: fields.get("vendor_id"),
    family: numberOf(fields.get("cpu family")),
    model: numberOf(fields.get("model")),
    mhz: numberOf(fields.get("cpu MHz")),
    avx512: flags === undefined ? undefined : flags.includes("avx512f"),
    ifma: flags === undefined ? undefined : flags.includes("avx512ifma"),
  };
}

/** This machine. */
export function thisMachine(): Machine {
  let cpuinfo: string | undefined;
  try {
    cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  } catch {
    cpuinfo = undefined;
  }
  return describeMachine(cpuinfo, cpus().length, cpus()[0]?.model ?? "cpu", totalmem());
}

/** One line for the bench's report: "2 × AMD EPYC (AuthenticAMD family 25 model 1, 2445 MHz, no AVX-512), 24 GiB". */
export function machineLine(m: Machine): string {
  const details: string[] = [];
  const kind = [m.vendor, m.family === undefined ? undefined : `family ${m.family}`, m.model === undefined ? undefined : `model ${m.model}`];
  if (kind.some((part) => part !== undefined)) details.push(kind.filter((part) => part !== undefined).join(" "));
  if (m.mhz !== undefined) details.push(`${Math.round(m.mhz)} MHz`);
  if (m.avx512 !== undefined) details.push(m.avx512 ? (m.ifma ? "AVX-512 with IFMA" : "AVX-512 without IFMA") : "no AVX-512");
  return `${m.cores} × ${m.cpu}${details.length > 0 ? ` (${details.join(", ")})` : ""}, ${m.memoryGiB} GiB`;
}
