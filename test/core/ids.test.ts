/** core/ids: UUIDv7 format (RFC 9562), time ordering, and the UUID check. */
import { describe, expect, test } from "bun:test";
import { isUuid, uuidv7 } from "../../src/core/ids.ts";

const T0 = Date.UTC(2026, 0, 1);
const CANONICAL = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The 48-bit millisecond timestamp at the front of a UUIDv7. */
const timestampOf = (id: string) => parseInt(id.replaceAll("-", "").slice(0, 12), 16);

describe("uuidv7", () => {
  test("is canonical lowercase, version 7, RFC 9562 variant", () => {
    for (let i = 0; i < 200; i++) {
      const id = uuidv7(T0 + i);
      expect(id).toMatch(CANONICAL);
      expect(id[14]).toBe("7");
      expect(parseInt(id[19] as string, 16) >> 2).toBe(0b10);
    }
  });

  test("carries the given instant in its first 48 bits", () => {
    expect(timestampOf(uuidv7(T0))).toBe(T0);
    expect(uuidv7(T0).slice(0, 13)).toBe("019b76da-a800");
    expect(timestampOf(uuidv7(0))).toBe(0);
    expect(timestampOf(uuidv7(2 ** 48 - 1))).toBe(2 ** 48 - 1);
  });

  test("orders by time: a later instant always sorts after an earlier one", () => {
    const ids = Array.from({ length: 100 }, (_, i) => uuidv7(T0 + i * 7));
    expect([...ids].reverse().sort()).toEqual(ids);
    expect(uuidv7(T0 + 1) > uuidv7(T0)).toBe(true);
    expect(uuidv7(T0 + 256) > uuidv7(T0 + 255)).toBe(true);
  });

  test("is unique within one millisecond", () => {
    expect(new Set(Array.from({ length: 1000 }, () => uuidv7(T0))).size).toBe(1000);
  });

  test("rises within one millisecond in the order the ids are made, and stays canonical", () => {
    for (const at of [T0, T0 + 1, T0]) {
      const ids = Array.from({ length: 5000 }, () => uuidv7(at));
      expect([...ids].sort()).toEqual(ids);
      for (const id of ids) expect(id).toMatch(CANONICAL);
      expect(new Set(ids.map(timestampOf))).toEqual(new Set([at]));
    }
  });

  test("an instant before the last one is carried as given", () => {
    uuidv7(T0 + 10);
    expect(timestampOf(uuidv7(T0))).toBe(T0);
  });
});

describe("isUuid", () => {
  test("accepts canonical UUIDs of any version, in either case", () => {
    for (const id of [uuidv7(T0), crypto.randomUUID(), "00000000-0000-0000-0000-000000000000", "0192D3C4-5E6F-7A8B-9C0D-1E2F3A4B5C6D"]) {
      expect(isUuid(id)).toBe(true);
    }
  });

  test("rejects everything else", () => {
    for (const value of [
      "",
      "not-a-uuid",
      "0192d3c45e6f7a8b9c0d1e2f3a4b5c6d",
      "{0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d}",
      "0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6",
      "0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6dd",
      " 0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
      "0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d\n",
      "g192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
    ]) {
      expect({ value, ok: isUuid(value) }).toEqual({ value, ok: false });
    }
  });
});
