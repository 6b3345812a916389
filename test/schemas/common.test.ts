/** schemas/common: the contract's "trimmed first" rule for name and audience. */
import { describe, expect, test } from "bun:test";
import { TRIMMED_FIELDS, trimTextFields } from "../../src/schemas/common.ts";

describe("trimTextFields", () => {
  test("trims exactly name and audience", () => {
    expect(TRIMMED_FIELDS).toEqual(["name", "audience"]);
    expect(trimTextFields({ name: " a ", audience: "\t b\n", description: " c " })).toStrictEqual({ name: "a", audience: "b", description: " c " });
  });

  test("leaves non-strings, nested objects and non-objects alone", () => {
    expect(trimTextFields({ name: 5, audience: null })).toStrictEqual({ name: 5, audience: null });
    expect(trimTextFields({ nested: { name: " x " } })).toStrictEqual({ nested: { name: " x " } });
    expect(trimTextFields([" name "])).toStrictEqual([" name "]);
    expect(trimTextFields(" name ")).toBe(" name ");
    expect(trimTextFields(null)).toBeNull();
  });
});
