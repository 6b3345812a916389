import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openGuard } from "../../src/store/lmdb/open-guard.ts";
import { tempDir } from "../helpers/app.ts";

/** Starts the child on `file` and resolves with it once it holds its locks; `done` is when it let go. */
async function child(file: string, mode: "write" | "open", ms: number) {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "open-guard-child.ts"), file, mode, String(ms)], { stdout: "pipe", stderr: "inherit" });
  const reader = proc.stdout.getReader();
  let text = "";
  const readUntil = async (pattern: RegExp) => {
    while (!pattern.test(text)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the child ended before ${pattern}: ${text}`);
      text += new TextDecoder().decode(value);
    }
    return pattern.exec(text) as RegExpExecArray;
  };
  await readUntil(/started/);
  return {
    done: async () => Number((await readUntil(/done (\d+)/))[1]),
    exited: proc.exited,
  };
}

describe("lmdb open guard: opening the data never overlaps a commit of another process", () => {
  test("an open waits until a write under way in another process has let go", async () => {
    const dir = tempDir("tokenmint-guard-");
    try {
      const file = join(dir.path, "tokenmint.mdb");
      const writer = await child(file, "write", 300);
      const guard = openGuard(file);
      expect(guard).toBeDefined();
      const openedAt = guard!.opening(() => Date.now());
      expect(openedAt).toBeGreaterThanOrEqual(await writer.done());
      expect(await writer.exited).toBe(0);
    } finally {
      dir.remove();
    }
  });

  test("while another process opens, a write waits to start until the open is done", async () => {
    const dir = tempDir("tokenmint-guard-");
    try {
      const file = join(dir.path, "tokenmint.mdb");
      const opener = await child(file, "open", 300);
      const guard = openGuard(file)!;
      await guard.beforeWrite();
      const startedAt = Date.now();
      guard.written();
      expect(startedAt).toBeGreaterThanOrEqual(await opener.done());
      expect(await opener.exited).toBe(0);
    } finally {
      dir.remove();
    }
  });
});
