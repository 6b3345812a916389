/**
 * @module cli/load-guard
 * Imported first by main.ts, so that a failure while the program's modules load is still one line
 * on stderr and exit 1. The compiled executable unpacks LMDB's native addon into the temporary
 * directory when the store module loads; a missing, read-only or noexec TMPDIR would otherwise
 * end in a stack trace. cli/run.ts ends the guard once every module has loaded: later failures
 * are its own.
 */
const onLoadFailure = (error: Error & { code?: string }): never => {
  const reason =
    error.code === "ERR_DLOPEN_FAILED"
      ? `cannot load a native module: ${error.message}; the executable unpacks it into the temporary directory (TMPDIR=${process.env.TMPDIR ?? "/tmp"}) and runs it from there, so that directory must exist, be writable, and allow running files (not be mounted noexec)`
      : `cannot load the program: ${error.message ?? String(error)}`;
  process.stderr.write(`tokenmint: ${reason}\n`);
  process.exit(1);
};

process.on("uncaughtException", onLoadFailure);

/** Called by cli/run.ts when every module has loaded. */
export function endLoadGuard(): void {
  process.off("uncaughtException", onLoadFailure);
}
