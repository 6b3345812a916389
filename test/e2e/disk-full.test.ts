/**
 * A data directory whose disk fills up (a small tmpfs): a write that cannot be made is a `503
 * unavailable` with the generic message, and the log says why; what was answered stays, reads and
 * tokens go on, SIGTERM ends the process cleanly (lmdb never met the full disk: the store refused
 * the write first), a CLI write and a start on new data say why they failed, and with room again
 * the server takes writes.
 *
 * Mounting needs root: where this process cannot mount a tmpfs, the test is skipped.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmdirSync, statSync, statfsSync, truncateSync, unlinkSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ERROR_TABLE } from "../../src/errors.ts";
import { LMDB_FILE, ROOM_SPARE, openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import { api, cleanup, createApiKeyWithCli, newMasterKey, runTokenmint, startServer, tempDataDir } from "./process.ts";

afterEach(cleanup);

const mount = (dir: string, size: string, remount = false) =>
  Bun.spawnSync(["mount", "-t", "tmpfs", "-o", `${remount ? "remount," : ""}size=${size}`, "tmpfs", dir], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
const unmount = (dir: string) => Bun.spawnSync(["umount", "-l", dir], { stdout: "ignore", stderr: "ignore" });

/** Whether this process can mount a tmpfs (root on Linux), tried once on a directory of its own. */
function canMount(): boolean {
  if (process.platform !== "linux" || process.getuid?.() !== 0) return false;
  const dir = mkdtempSync(join(tmpdir(), "tokenmint-mount-"));
  try {
    if (!mount(dir, "1m")) return false;
    unmount(dir);
    return true;
  } catch {
    return false;
  } finally {
    rmdirSync(dir);
  }
}

const mountable = canMount();

/** A tmpfs of `size` mounted on a new temporary directory; the test unmounts it. */
function mountedDisk(size: string): string {
  const disk = join(tempDataDir(), "disk");
  mkdirSync(disk);
  expect(mount(disk, size)).toBe(true);
  return disk;
}

/** Fills the disk of `path` with a file of its own. */
function fillDisk(path: string): void {
  const fd = openSync(path, "w");
  const chunk = new Uint8Array(4096);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    expect((error as NodeJS.ErrnoException).code).toBe("ENOSPC");
  }
  closeSync(fd);
}

describe.each([1, 2])("a full disk, %i worker(s)", (workers) => {
  test.skipIf(!mountable)(
    "a refused write is a 503 that loses nothing; the log says why; reads and tokens go on; SIGTERM ends the process cleanly; the CLI and a fresh start say why",
    async () => {
      const disk = mountedDisk("2m");
      try {
        const dataDir = join(disk, "data");
        const masterKey = newMasterKey();
        const settings = { TOKENMINT_WORKERS: String(workers) };
        const server = await startServer({ dataDir, masterKey, settings });
        const apiKey = await createApiKeyWithCli(server);
        const provider = (await (await api(server, apiKey, "POST", "/v1/providers", { name: "kept" })).json()) as { id: string };
        const client = (await (await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients`, { name: "c", audience: "https://api.full.test" })).json()) as {
          id: string;
        };

        // Providers with the longest description allowed until a write is refused.
        const description = "d".repeat(1000);
        let created = 1;
        let refused: Response | undefined;
        for (let i = 0; i < 5000 && refused === undefined; i++) {
          const res = await api(server, apiKey, "POST", "/v1/providers", { name: `p${i}`, description });
          if (res.status === 201) created++;
          else refused = res;
        }
        expect(refused).toBeDefined();
        const answer = refused as Response;
        expect(answer.status).toBe(503);
        expect(await answer.json()).toEqual({ code: "unavailable", message: ERROR_TABLE.unavailable.message });

        // The log says which file and why, in a JSON line; the answer said neither.
        const failure = server.proc.logs().find((line) => line.msg === "request failed");
        expect(failure).toMatchObject({ level: "error", method: "POST", route: "/v1/providers", status: 503, error: "StoreError" });
        expect(String(failure?.stack)).toStartWith(`StoreError: cannot write ${join(dataDir, LMDB_FILE)}: `);

        // What was answered is there, and issuing needs no write.
        expect((await api(server, apiKey, "GET", `/v1/providers/${provider.id}`)).status).toBe(200);
        const token = await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients/${client.id}/tokens`);
        expect(token.status).toBe(201);
        expect((await fetch(`${server.url}/.well-known/jwks`)).status).toBe(200);

        // The data file's reserve left the disk's last bytes to the files beside it.
        const { bavail, bsize } = statfsSync(disk);
        expect(bavail * bsize).toBeGreaterThanOrEqual(ROOM_SPARE / 2);

        // Nothing was left half-written: the process stops cleanly, its store closed.
        expect(await server.proc.stop("SIGTERM", 20_000)).toBe(0);
        expect(server.proc.stderr).not.toContain("did not close");
        expect(server.proc.logs().filter((line) => line.msg === "the store did not close" || line.msg === "worker did not stop cleanly")).toEqual([]);

        // The stopped server gave its pid file back to the disk: another file takes it.
        const filler = join(disk, "filler");
        fillDisk(filler);

        // A CLI write says why it failed.
        const cli = await runTokenmint(["apikeys", "create", "--name", "late"], server.env, 20_000);
        expect(cli.code).toBe(1);
        expect(cli.stderrLines.at(-1)).toStartWith(`tokenmint: cannot write ${join(dataDir, LMDB_FILE)}: `);

        // A server started on new data says which write failed: with 8 KiB free, before lmdb
        // creates its files (a page of its mapped lock file the disk cannot give would kill the
        // process); with the filler gone, at its first write, which cannot keep its room.
        const freshDir = join(disk, "fresh");
        truncateSync(filler, statSync(filler).size - 8192);
        const fresh = await runTokenmint(["serve"], { ...server.env, TOKENMINT_DATA_DIR: freshDir }, 20_000);
        expect(fresh.code).toBe(1);
        expect(fresh.stderrLines.at(-1)).toStartWith(`tokenmint: cannot open the data directory ${freshDir}: cannot write ${join(freshDir, LMDB_FILE)}: no space left on device (`);
        unlinkSync(filler);
        const roomless = await runTokenmint(["serve"], { ...server.env, TOKENMINT_DATA_DIR: freshDir }, 20_000);
        expect(roomless.code).toBe(1);
        expect(roomless.stderrLines.at(-1)).toContain(`cannot write ${join(freshDir, LMDB_FILE)}: no space left on device (each write needs 1 MiB free beyond the data)`);

        // With room again, every answered write is there and new ones are taken.
        expect(mount(disk, "8m", true)).toBe(true);
        const again = await startServer({ dataDir, masterKey, settings });
        let listed = 0;
        let cursor: string | null = null;
        do {
          const page = (await (await api(again, apiKey, "GET", `/v1/providers?limit=100${cursor === null ? "" : `&cursor=${cursor}`}`)).json()) as {
            items: unknown[];
            nextCursor: string | null;
          };
          listed += page.items.length;
          cursor = page.nextCursor;
        } while (cursor !== null);
        expect(listed).toBe(created);
        expect((await api(again, apiKey, "POST", "/v1/providers", { name: "after" })).status).toBe(201);
        expect(await again.proc.stop()).toBe(0);
      } finally {
        unmount(disk);
      }
    },
    120_000,
  );
});

/** Takes the disk of `dir` down to `left` bytes free with a new file there (tmpfs allocates it at once). */
function leaveFree(dir: string, left: number): void {
  const { bavail, bsize } = statfsSync(dir);
  const size = bavail * bsize - left;
  expect(Bun.spawnSync(["fallocate", "-l", String(size), join(dir, `filler-${size}`)]).exitCode).toBe(0);
}

describe("the room check of a write", () => {
  test.skipIf(!mountable)(
    "every write asks the disk: one right after a write that found room is refused once another program took the room, though a small commit would still fit",
    async () => {
      const disk = mountedDisk("64m");
      const store = openLmdbStore(join(disk, "data"));
      const noRoom = `cannot write ${join(disk, "data", LMDB_FILE)}: no space left on device`;
      try {
        await store.setMeta("with room", 1);
        leaveFree(disk, 768 << 10);
        await expect(store.setMeta("at once", 1)).rejects.toThrow(noRoom);
        expect(await store.getMeta("with room")).toBe(1);
        expect(await store.getMeta("at once")).toBeUndefined();
      } finally {
        await store.close();
        unmount(disk);
      }
    },
    60_000,
  );
});
