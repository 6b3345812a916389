import { describe, expect, test } from "bun:test";
import { boundedMemo } from "../../src/runtime/memo.ts";

describe("boundedMemo", () => {
  test("computes a key once while it is remembered, undefined results included", () => {
    const computed: string[] = [];
    const memo = boundedMemo((key: string) => {
      computed.push(key);
      return key === "none" ? undefined : key.length;
    });
    expect([memo("ab"), memo("ab"), memo("none"), memo("none"), memo("abc")]).toEqual([2, 2, undefined, undefined, 3]);
    expect(computed).toEqual(["ab", "none", "abc"]);
  });

  test("holds at most its bound: full, it forgets everything and starts again", () => {
    const computed: number[] = [];
    const memo = boundedMemo((key: number) => {
      computed.push(key);
      return key * 2;
    }, 3);
    for (const key of [1, 2, 3, 1, 2, 3]) expect(memo(key)).toBe(key * 2);
    expect(computed).toEqual([1, 2, 3]);
    // A fourth key empties it: the first three are computed again, the fourth is kept.
    expect(memo(4)).toBe(8);
    expect(memo(4)).toBe(8);
    expect(memo(1)).toBe(2);
    expect(computed).toEqual([1, 2, 3, 4, 1]);
  });
});
