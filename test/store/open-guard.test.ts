import { describe, expect, test } from "bun:test";
import { copyFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { LMDB_FILE, openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import { openGuard } from "../../src/store/lmdb/open-guard.ts";
import { withTempDir } from "../helpers/app.ts";
import { newProjectId, providerRecord, T0 } from "./fixtures.ts";

/** Reads `proc`'s stdout as it comes: `until(pattern)` resolves with the first match in all read so far. */
function output(proc: { stdout: ReadableStream<Uint8Array> }) {
  const reader = proc.stdout.getReader();
  let text = "";
  return async (pattern: RegExp) => {
    while (!pattern.test(text)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the child ended before ${pattern}: ${text}`);
      text += new TextDecoder().decode(value);
    }
    return pattern.exec(text) as RegExpExecArray;
  };
}

/** Starts the child on `file` and resolves with it once it holds its locks; `done` is when it let go. */
async function child(file: string, mode: "write" | "open", ms: number) {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "open-guard-child.ts"), file, mode, String(ms)], { stdout: "pipe", stderr: "inherit" });
  const until = output(proc);
  await until(/started/);
  return {
    done: async () => Number((await until(/done (\d+)/))[1]),
    exited: proc.exited,
  };
}

const inDir = (body: (dir: string) => Promise<void>) => withTempDir("tokenmint-guard-", body);

describe("lmdb open guard: opening the data never overlaps a commit of another process", () => {
  test("an open waits until a write under way in another process has let go", () =>
    inDir(async (dir) => {
      const file = join(dir, "tokenmint.mdb");
      const writer = await child(file, "write", 300);
      const guard = openGuard(file);
      expect(guard).toBeDefined();
      const openedAt = guard!.opening(() => Date.now());
      expect(openedAt).toBeGreaterThanOrEqual(await writer.done());
      expect(await writer.exited).toBe(0);
    }));

  test("while another process opens, a write waits to start until the open is done", () =>
    inDir(async (dir) => {
      const file = join(dir, "tokenmint.mdb");
      const opener = await child(file, "open", 300);
      const guard = openGuard(file)!;
      await guard.beforeWrite();
      const startedAt = Date.now();
      guard.written();
      expect(startedAt).toBeGreaterThanOrEqual(await opener.done());
      expect(await opener.exited).toBe(0);
    }));

  test("a command's write that waits while a restore replaces the data is refused, and goes into neither file", () =>
    inDir(async (dir) => {
      const A = newProjectId(T0);
      const store = openLmdbStore(dir);
      const before = providerRecord(A, T0, "before");
      await store.createProvider(before);
      await store.close();
      const proc = Bun.spawn([process.execPath, join(import.meta.dir, "replaced-child.ts"), dir, A], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
      const until = output(proc);
      await until(/opened/);
      const target = join(dir, LMDB_FILE);
      await openGuard(target, false)!.exclusively(async () => {
        // The command writes now: it waits until the data is replaced.
        proc.stdin.write("go\n");
        proc.stdin.flush();
        await Bun.sleep(300);
        // As restore does: a copy of the data put in its place.
        copyFileSync(target, `${target}.staged`);
        renameSync(`${target}.staged`, target);
      });
      proc.stdin.end();
      expect((await until(/(refused|written) .*/))[0]).toMatch(/^refused .*was replaced since this process opened it \(a restore\): run the command again/);
      expect(await proc.exited).toBe(0);
      const after = openLmdbStore(dir);
      expect((await after.listProviders(A, { limit: 10 })).items.map((p) => p.name).sort()).toEqual(["before", "earlier"]);
      await after.close();
    }));

  test("writes that keep the shared lock held let an opener in: new ones wait from the next turn on", () =>
    inDir(async (dir) => {
      const file = join(dir, "tokenmint.mdb");
      const guard = openGuard(file)!;
      const starts: number[] = [];
      let stop = false;
      // Three overlapping writers: one of them is always under way, so the lock is never let go by itself.
      const writer = async () => {
        while (!stop) {
          await guard.beforeWrite();
          starts.push(Date.now());
          await Bun.sleep(2);
          guard.written();
        }
      };
      const writers = [writer(), writer(), writer()];
      await Bun.sleep(50);
      const opener = await child(file, "open", 300);
      const doneAt = await opener.done();
      stop = true;
      await Promise.all(writers);
      // No write started while the opener held the locks (guarded: it did not wait out its bound).
      expect(starts.filter((at) => at > doneAt - 295 && at < doneAt - 5)).toEqual([]);
      expect(starts.filter((at) => at >= doneAt).length).toBeGreaterThan(0);
      expect(await opener.exited).toBe(0);
    }));

  test("a restore's hold is refused, not taken unguarded, when a write under way does not end in time", () =>
    inDir(async (dir) => {
      const file = join(dir, "tokenmint.mdb");
      const writer = await child(file, "write", 1500);
      let ran = false;
      const hold = openGuard(file, true, 300)!.exclusively(async () => {
        ran = true;
      });
      await expect(hold).rejects.toThrow(`another process has been writing or opening ${file} for over 0.3 s: let it finish (or stop it), then run the command again (nothing was changed)`);
      expect(ran).toBe(false);
      await writer.done();
      expect(await writer.exited).toBe(0);
      // Once the write is done, the hold is had.
      expect(await openGuard(file, true, 300)!.exclusively(async () => "held")).toBe("held");
    }));

  test("an open waits a bounded time for a write that never ends; a write waits as long as an opener holds the locks", () =>
    inDir(async (dir) => {
      const file = join(dir, "tokenmint.mdb");
      const openWaitMs = 300;
      const writer = await child(file, "write", 1500);
      const openedAt = openGuard(file, true, openWaitMs)!.opening(() => Date.now());
      expect(openedAt).toBeLessThan(await writer.done());
      expect(await writer.exited).toBe(0);
      // Going ahead while an opener is inside lmdb's open would break the data for every writer.
      const opener = await child(file, "open", 1500);
      const guard = openGuard(file, true, openWaitMs)!;
      await guard.beforeWrite();
      const startedAt = Date.now();
      guard.written();
      expect(startedAt).toBeGreaterThanOrEqual(await opener.done());
      expect(await opener.exited).toBe(0);
    }));
});
