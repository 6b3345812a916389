/**
 * cli/serve-lock: which pid in `serve.pid` still holds the data directory. A systemd unit with
 * `ProtectProc=invisible` hides other users' processes, so a stale file naming a pid now reused by
 * another user's program must not keep the server from starting.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { acquireServeLock, liveServer, type ProcessProbe, SERVE_LOCK_FILE } from "../../src/cli/serve-lock.ts";
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
