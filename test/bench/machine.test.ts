/**
 * The machine line of the benchmark: what decides the figures is read off /proc/cpuinfo, so
 * runs on different kinds of one model name ("AMD EPYC") tell apart.
 */
import { describe, expect, test } from "bun:test";
import { describeMachine, machineLine } from "../../scripts/bench/machine.ts";

const processor = (n: number, flags: string) => `processor\t: ${n}
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
cpu MHz\t\t: 2445.430
flags\t\t: fpu vme ${flags}
`;

describe("describeMachine", () => {
  test("reads the first processor's maker, family, model, clock and AVX-512 flags", () => {
    const m = describeMachine(`${processor(0, "avx2 bmi2")}\n${processor(1, "avx512f avx512ifma")}`, 2, "AMD EPYC", 24 * 2 ** 30);
    expect(m).toEqual({ cores: 2, cpu: "AMD EPYC", memoryGiB: 24, vendor: "AuthenticAMD", family: 25, model: 1, mhz: 2445.43, avx512: false, ifma: false });
    expect(machineLine(m)).toBe("2 × AMD EPYC (AuthenticAMD family 25 model 1, 2445 MHz, no AVX-512), 24 GiB");
  });

  test("tells AVX-512 with IFMA from AVX-512 without it", () => {
    expect(machineLine(describeMachine(processor(0, "avx2 avx512f avx512ifma"), 2, "AMD EPYC", 24 * 2 ** 30))).toContain("AVX-512 with IFMA");
    expect(machineLine(describeMachine(processor(0, "avx2 avx512f avx512bw"), 2, "AMD EPYC", 24 * 2 ** 30))).toContain("AVX-512 without IFMA");
  });

  test("without /proc/cpuinfo, the model name, cores and memory alone", () => {
    const m = describeMachine(undefined, 8, "Apple M2", 16 * 2 ** 30);
    expect(m).toEqual({ cores: 8, cpu: "Apple M2", memoryGiB: 16 });
    expect(machineLine(m)).toBe("8 × Apple M2, 16 GiB");
  });
});
