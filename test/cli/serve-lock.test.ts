/**
 * cli/serve-lock: which pid in `serve.pid` still holds the data directory. A systemd unit with
 * `ProtectProc=invisible` hides other users' processes, so a stale file naming a pid now reused by
 * another user's program must not keep the server from starting.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { acquireServeLock, liveServer, lockDataDir, lockHolder, type ProcessProbe, SERVE_LOCK_FILE } from "../../src/cli/serve-lock.ts";
import { tempDir } from "../helpers/app.ts";

const PID = 424242;
const errno = (code: string) => Object.assign(new Error(code), { code });

/** A probe for one process: how signalling it ends, its command line (or the error reading it), and whether /proc exists. */
function probe(signal: "alive" | "ESRCH" | "EPERM", cmdline: string | "ENOENT" | "EACCES", hasProc = true): ProcessProbe {
  return {
    signal: () => {
      if (signal !== "alive") throw errno(signal);
    },
    cmdline: () => {
      if (cmdline === "ENOENT" || cmdline === "EACCES") throw errno(cmdline);
      return cmdline;
    },
    hasProc: () => hasProc,
  };
}

describe("liveServer", () => {
  let dir: { path: string; remove: () => void };
  beforeEach(() => {
    dir = tempDir("tokenmint-serve-lock-");
    writeFileSync(join(dir.path, SERVE_LOCK_FILE), `${PID}\n`);
  });
  afterEach(() => dir.remove());

  const SERVE = "/usr/local/bin/tokenmint\0serve\0";

  test("a live `serve` holds the directory, whoever it runs as, when /proc shows it", () => {
    expect(liveServer(dir.path, probe("alive", SERVE))).toBe(PID);
    expect(liveServer(dir.path, probe("EPERM", SERVE))).toBe(PID);
  });

  test("a gone pid, or one reused by another program, does not", () => {
    expect(liveServer(dir.path, probe("ESRCH", SERVE))).toBeUndefined();
    expect(liveServer(dir.path, probe("alive", "/usr/sbin/sshd\0-D\0"))).toBeUndefined();
    expect(liveServer(dir.path, probe("EPERM", "/usr/sbin/sshd\0"))).toBeUndefined();
    // Gone between the signal and the read.
    expect(liveServer(dir.path, probe("alive", "ENOENT"))).toBeUndefined();
  });

  test("another user's process that /proc hides is not a holder (ProtectProc=invisible)", () => {
    expect(liveServer(dir.path, probe("EPERM", "ENOENT"))).toBeUndefined();
    expect(liveServer(dir.path, probe("EPERM", "EACCES"))).toBeUndefined();
  });

  test("a copy of the directory, serve.pid and all, is not held by the original's server", () => {
    const original = tempDir("tokenmint-serve-lock-");
    const copy = tempDir("tokenmint-serve-lock-");
    try {
      const lock = acquireServeLock(original.path);
      expect("release" in lock).toBe(true);
      const written = readFileSync(join(original.path, SERVE_LOCK_FILE), "utf8");
      writeFileSync(join(copy.path, SERVE_LOCK_FILE), written.replace(String(process.pid), String(PID)));
      writeFileSync(join(original.path, SERVE_LOCK_FILE), written.replace(String(process.pid), String(PID)));
      expect(liveServer(original.path, probe("alive", SERVE))).toBe(PID);
      expect(liveServer(copy.path, probe("alive", SERVE))).toBeUndefined();
    } finally {
      original.remove();
      copy.remove();
    }
  });

  test("without /proc at all, a live process is trusted to be the holder", () => {
    expect(liveServer(dir.path, probe("EPERM", "ENOENT", false))).toBe(PID);
    expect(liveServer(dir.path, probe("alive", "ENOENT", false))).toBe(PID);
  });

  test("no file, a file that names no pid, or this process's own pid: no holder", () => {
    const alive = probe("alive", SERVE);
    for (const text of ["", "abc\n", "0\n", "-5\n", `${process.pid}\n`]) {
      writeFileSync(join(dir.path, SERVE_LOCK_FILE), text);
      expect({ text, holder: liveServer(dir.path, alive) }).toEqual({ text, holder: undefined });
    }
    expect(liveServer(join(dir.path, "absent"), alive)).toBeUndefined();
  });

  test("on this system: a live process of another program named in the file is not a holder", () => {
    const sleeper = Bun.spawn(["sleep", "30"]);
    try {
      writeFileSync(join(dir.path, SERVE_LOCK_FILE), `${sleeper.pid}\n`);
      expect(liveServer(dir.path)).toBeUndefined();
    } finally {
      sleeper.kill();
    }
  });
});

describe("acquireServeLock", () => {
  /** Starts `count` servers taking the lock of `dataDir` in the same instant; returns what each printed, and a function that stops them. */
  async function startTogether(dataDir: string, count: number, command = "serve"): Promise<{ results: string[]; pids: number[]; stop: () => Promise<void> }> {
    const procs = Array.from({ length: count }, () =>
      Bun.spawn([process.execPath, join(import.meta.dir, "serve-lock-child.ts"), dataDir, command], { stdin: "pipe", stdout: "pipe", stderr: "inherit" }),
    );
    const readers = procs.map((proc) => proc.stdout.getReader());
    const decoder = new TextDecoder();
    const line = async (i: number) => {
      let text = "";
      while (!text.endsWith("\n")) {
        const { value, done } = await (readers[i] as ReadableStreamDefaultReader<Uint8Array>).read();
        if (done) break;
        text += decoder.decode(value);
      }
      return text.trim();
    };
    expect(await Promise.all(procs.map((_, i) => line(i)))).toEqual(procs.map(() => "ready"));
    for (const proc of procs) proc.stdin.write("go\n");
    for (const proc of procs) await proc.stdin.flush();
    const results = await Promise.all(procs.map((_, i) => line(i)));
    const stop = async () => {
      for (const proc of procs) await proc.stdin.end();
      await Promise.all(procs.map((proc) => proc.exited));
    };
    return { results, pids: procs.map((proc) => proc.pid), stop };
  }

  test("of servers started in the same instant, exactly one takes the lock, on a new directory and over a stale file", async () => {
    for (let round = 0; round < 6; round++) {
      const dir = tempDir("tokenmint-serve-lock-");
      try {
        // Every other round, a file left by a killed server (a pid that is gone).
        if (round % 2 === 1) writeFileSync(join(dir.path, SERVE_LOCK_FILE), "2147483646\n");
        const { results, stop } = await startTogether(dir.path, 4);
        try {
          const held = results.filter((result) => result === "held");
          expect({ round, held: held.length }).toEqual({ round, held: 1 });
          const holder = Number.parseInt(readFileSync(join(dir.path, SERVE_LOCK_FILE), "utf8"), 10);
          expect(results.filter((result) => result !== "held")).toEqual([`refused ${holder}`, `refused ${holder}`, `refused ${holder}`]);
        } finally {
          await stop();
        }
        // Released by its holder; nothing else is left in the directory.
        expect(readdirSync(dir.path)).toEqual([]);
      } finally {
        dir.remove();
      }
    }
  }, 30_000);

  test("a restore holding the directory keeps servers off it, and is named as a restore", async () => {
    const dir = tempDir("tokenmint-serve-lock-");
    try {
      const { results, pids, stop } = await startTogether(dir.path, 1, "restore");
      try {
        expect(results).toEqual(["held"]);
        expect(lockHolder(dir.path)).toEqual({ pid: pids[0], command: "restore" });
        expect(liveServer(dir.path)).toBe(pids[0] as number);
        expect(() => lockDataDir(dir.path)).toThrow(`tokenmint restore (pid ${pids[0]}) is replacing the data in ${dir.path}`);
      } finally {
        await stop();
      }
      const lock = lockDataDir(dir.path);
      expect(lockHolder(dir.path)).toBeUndefined();
      lock.release();
    } finally {
      dir.remove();
    }
  });

  test("over a stale file, a process that replaces it while two others start leaves one holder: the place is never empty", () => {
    const dir = tempDir("tokenmint-serve-lock-");
    const path = join(dir.path, SERVE_LOCK_FILE);
    const DEAD = 2147483646;
    writeFileSync(path, `${DEAD}\n`);
    // A: a live server (the word serve on its command line), which replaces the stale file first.
    const a = Bun.spawn(["bash", "-c", "sleep 30; true", "serve"]);
    const system: ProcessProbe = { signal: (pid) => void process.kill(pid, 0), cmdline: (pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8"), hasProc: () => true };
    let c = "";
    let step = 0;
    const probe: ProcessProbe = {
      ...system,
      signal: (pid) => {
        if (pid === DEAD && step === 0) {
          // This process (B) has found the stale file; meanwhile A replaces it with its own.
          step = 1;
          const { dev, ino } = statSync(dir.path);
          writeFileSync(`${path}.a`, `${a.pid}\n${dev}:${ino}\n`);
          renameSync(`${path}.a`, path);
        } else if (pid === a.pid && step === 1) {
          // B looks at the file again: a third server (C) starts right now.
          step = 2;
          const script = `const lock = (await import(${JSON.stringify(join(import.meta.dir, "../../src/cli/serve-lock.ts"))})).acquireServeLock(process.argv[1]); process.stdout.write("heldBy" in lock ? "refused " + lock.heldBy.pid : "held");`;
          c = Bun.spawnSync([process.execPath, "-e", script, dir.path, "serve"], { stdout: "pipe", stderr: "inherit" }).stdout.toString();
        }
        system.signal(pid);
      },
    };
    try {
      const b = acquireServeLock(dir.path, probe);
      expect({ b, c, named: Number.parseInt(readFileSync(path, "utf8"), 10) }).toEqual({ b: { heldBy: { pid: a.pid, command: "serve" } }, c: `refused ${a.pid}`, named: a.pid });
      expect(readdirSync(dir.path)).toEqual([SERVE_LOCK_FILE]);
    } finally {
      a.kill();
      dir.remove();
    }
  });

  test("a takeover file left by a killed process is removed only while it is that one: a server taking over meanwhile keeps its own", () => {
    const dir = tempDir("tokenmint-serve-lock-");
    const sync = tempDir("tokenmint-serve-lock-sync-");
    const path = join(dir.path, SERVE_LOCK_FILE);
    const STALE = 2147483646; // the serve.pid of a killed server
    const KILLED = 2147483645; // a server killed while it held serve.pid.takeover
    writeFileSync(path, `${STALE}\n`);
    writeFileSync(`${path}.takeover`, `${KILLED}\n`);
    const waitFor = (name: string) => {
      for (let i = 0; i < 2000 && !existsSync(join(sync.path, name)); i++) Bun.sleepSync(5);
    };
    let b: ReturnType<typeof Bun.spawn> | undefined;
    let staleLooks = 0;
    const probe: ProcessProbe = {
      signal: (pid) => {
        if (pid === KILLED && b === undefined) {
          // This process (C) has found the killed server's takeover file: B starts and takes over now.
          b = Bun.spawn([process.execPath, join(import.meta.dir, "serve-lock-slow-child.ts"), dir.path, sync.path, String(STALE), "serve"], { stderr: "inherit" });
          waitFor("b-checked");
        }
        if (pid === STALE && ++staleLooks === 3) {
          // C looks at serve.pid again (holding the takeover, were B's removed): B finishes meanwhile.
          writeFileSync(join(sync.path, "c-checked"), "");
          waitFor("b-result");
        }
        process.kill(pid, 0);
      },
      cmdline: (pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8"),
      hasProc: () => true,
    };
    try {
      const c = acquireServeLock(dir.path, probe);
      const bPid = b?.pid;
      expect({ b: readFileSync(join(sync.path, "b-result"), "utf8"), c, named: Number.parseInt(readFileSync(path, "utf8"), 10) }).toEqual({
        b: "held",
        c: { heldBy: { pid: bPid as number, command: "serve" } },
        named: bPid as number,
      });
      expect(readdirSync(dir.path)).toEqual([SERVE_LOCK_FILE]);
    } finally {
      b?.kill();
      dir.remove();
      sync.remove();
    }
  });
});

