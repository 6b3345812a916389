import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { READ_BUFFER_BYTES, shrinkLmdbReadBuffer } from "../../scripts/build/lmdb-read-buffer.ts";
import { tempDir } from "../helpers/app.ts";

const root = join(import.meta.dir, "..", "..");
const lmdbFile = (name: string) => join(root, "node_modules", "lmdb", name);

describe("lmdb's read buffer", () => {
  test("the installed lmdb takes the change in each file it may load from", () => {
    const loader = shrinkLmdbReadBuffer(readFileSync(lmdbFile("native.js"), "utf8"), lmdbFile("native.js"));
    expect(loader).toContain("globalBuffer = undefined;");
    expect(loader).not.toContain("globalBuffer = externals.globalBuffer;");
    const reader = shrinkLmdbReadBuffer(readFileSync(lmdbFile("read.js"), "utf8"), lmdbFile("read.js"));
    expect(reader).toContain(`makeReusableBuffer(${READ_BUFFER_BYTES})`);
    expect(reader).not.toContain("let getValueBytes = globalBuffer;");
    const bundle = shrinkLmdbReadBuffer(readFileSync(lmdbFile("dist/index.cjs"), "utf8"), lmdbFile("dist/index.cjs"));
    expect(bundle).toContain("globalBuffer = undefined;");
    expect(bundle).toContain(`makeReusableBuffer(${READ_BUFFER_BYTES})`);
  });

  test("an lmdb whose code moved fails to load rather than running half-changed", () => {
    const reader = readFileSync(lmdbFile("read.js"), "utf8");
    expect(() => shrinkLmdbReadBuffer(reader.replace("let getValueBytes = globalBuffer;", "let getValueBytes = theBuffer;"), "lmdb/read.js")).toThrow(/lmdb changed/);
    expect(() => shrinkLmdbReadBuffer(`${reader}\nlet getValueBytes = globalBuffer;`, "lmdb/read.js")).toThrow(/exactly once/);
    expect(() => shrinkLmdbReadBuffer("module.exports = 1;", "lmdb/other.js")).toThrow(/not an lmdb file/);
  });

  test("a process started here holds a small read buffer and reads values of any size, one by one and in a range", () => {
    const dir = tempDir("tokenmint-read-buffer-");
    try {
      // Started as every `bun` run here is (bunfig.toml's preload), not through this test's own process.
      const run = Bun.spawnSync([process.execPath, join(import.meta.dir, "read-buffer-child.ts"), dir.path], { cwd: root, stdout: "pipe", stderr: "pipe" });
      expect(run.stderr.toString()).toBe("");
      expect(run.exitCode).toBe(0);
      const { reads, arrayBuffers } = JSON.parse(run.stdout.toString()) as { reads: Record<string, boolean>; arrayBuffers: number };
      expect(Object.values(reads)).toEqual(Array(7).fill(true));
      // lmdb's own buffer is 16 MiB; what is left is the small one and what the large read grew.
      expect(arrayBuffers).toBeLessThan(8 * 1024 * 1024);
    } finally {
      dir.remove();
    }
  });
});
